#!/bin/sh
# kchaos-ctl: the SSH backend's hands on a host (harness/backends/ssh.py uploads it). One call per action,
# so a fault costs one round trip. DIR is a node's directory; DIR/pid holds "PID STARTTIME" of the process
# started there, and every signal goes to that PID only while it still has that start time (not a zombie).
#   kchaos-ctl start DIR ARGV...   start ARGV in DIR under setsid+nohup, logs appended to DIR/std{out,err}.log
#   kchaos-ctl alive DIR           exit 0 when the node's process runs (stopped counts as running)
#   kchaos-ctl signal DIR SIG      send SIG (exit 3 when not running); STOP/CONT wait for the new state
#   kchaos-ctl kill DIR            SIGKILL and wait until it is gone (no-op when not running)
#   kchaos-ctl stop DIR SECONDS    SIGTERM, wait up to SECONDS, then SIGKILL (exit 5 when it had to)
#   kchaos-ctl verify PID START SIG    signal a process by identity (heal after a killed harness)
# A node that is gone leaves no libfaketime files behind (/dev/shm/faketime_shm_PID and
# sem.faketime_sem_PID, which libfaketime removes only on a normal exit): kill, stop, a KILL by verify
# and the start of the next incarnation remove those of a dead process.
set -u
action=$1
shift

# "STATE STARTTIME" of PID, or nothing when there is no such process (the comm field may hold spaces).
stat_of() {
    [ -r "/proc/$1/stat" ] || return 1
    sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1,20
}

# The node's PID when it is still the process DIR/pid names (a zombie is gone).
mine() {
    set -- $(cat "$1/pid" 2>/dev/null) || return 1
    [ $# -eq 2 ] || return 1
    same "$1" "$2" && echo "$1"
}

same() {
    s=$(stat_of "$1") || return 1
    [ "${s#* }" = "$2" ] || return 1
    case ${s%% *} in Z|X) return 1 ;; esac
    return 0
}

# Remove libfaketime's files of PID, unless a live process has that PID (its own, or another's by now).
forget_shm() {
    if s=$(stat_of "$1"); then
        case ${s%% *} in Z|X) ;; *) return 0 ;; esac
    fi
    rm -f "/dev/shm/faketime_shm_$1" "/dev/shm/sem.faketime_sem_$1"
}

# The PID DIR/pid names, whatever became of it.
recorded() {
    set -- $(cat "$1/pid" 2>/dev/null)
    [ $# -eq 2 ] && echo "$1"
}

wait_state() {  # PID START WANT(stopped|running|gone) TRIES
    i=0
    while [ "$i" -lt "$4" ]; do
        s=$(stat_of "$1") || return 0
        [ "${s#* }" = "$2" ] || return 0
        case ${s%% *} in
            Z|X) return 0 ;;
            T|t) [ "$3" = stopped ] && return 0 ;;
            *) [ "$3" = running ] && return 0 ;;
        esac
        sleep 0.01
        i=$((i + 1))
    done
    return 1
}

case $action in
start)
    dir=$1
    shift
    cd "$dir" || exit 2
    if pid=$(mine "$dir"); then echo "already running $pid" >&2; exit 4; fi
    if old=$(recorded "$dir"); then forget_shm "$old"; fi  # the previous incarnation died by itself
    rm -f pid.new
    nohup setsid sh -c 'echo $$ > pid.new; exec "$@"' kchaos-node "$@" >>stdout.log 2>>stderr.log </dev/null &
    i=0
    while [ ! -s pid.new ] && [ "$i" -lt 500 ]; do sleep 0.01; i=$((i + 1)); done
    pid=$(cat pid.new 2>/dev/null) || { echo "no pid after 5 s" >&2; exit 2; }
    s=$(stat_of "$pid") || s="X 0"
    echo "$pid ${s#* }" > pid
    rm -f pid.new
    cat pid
    ;;
alive)
    mine "$1" >/dev/null
    ;;
signal)
    pid=$(mine "$1") || exit 3
    set -- $(cat "$1/pid") "$2"
    kill -s "$3" "$1" || exit 3
    case $3 in
        STOP) wait_state "$1" "$2" stopped 1000 ;;
        CONT) wait_state "$1" "$2" running 1000 ;;
    esac
    ;;
kill)
    if ! pid=$(mine "$1"); then
        if old=$(recorded "$1"); then forget_shm "$old"; fi
        exit 0
    fi
    set -- $(cat "$1/pid")
    kill -s KILL "$1" 2>/dev/null
    wait_state "$1" "$2" gone 500 && forget_shm "$1"
    ;;
stop)
    pid=$(mine "$1") || exit 0
    tries=$(($2 * 100))
    set -- $(cat "$1/pid")
    kill -s TERM "$1" 2>/dev/null
    wait_state "$1" "$2" gone "$tries" && { forget_shm "$1"; exit 0; }
    kill -s KILL "$1" 2>/dev/null
    wait_state "$1" "$2" gone 500 && forget_shm "$1"
    exit 5
    ;;
verify)
    if ! same "$1" "$2"; then
        forget_shm "$1"  # it died by itself (a no-op when the PID is another live process's)
        exit 3
    fi
    kill -s "$3" "$1" || exit 3
    if [ "$3" = KILL ]; then wait_state "$1" "$2" gone 500 && forget_shm "$1"; fi
    ;;
*)
    echo "kchaos-ctl: unknown action $action" >&2
    exit 2
    ;;
esac
