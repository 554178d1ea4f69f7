"""The node's timers: election timeout, fetch timeout, check-quorum, request timeouts, backoff.

The core holds deadlines, not clocks: `_check_deadlines` fires whatever is due at `now` (an election,
a failed election's retry, a zombie leader's step-down, a request deemed lost) and `_arm_timer` asks
the runtime for one timer at the earliest deadline left.
"""

from __future__ import annotations

from node.raft.actions import SetTimer
from node.raft.base import NEVER, RaftNodeBase
from node.raft.quorum_state import Candidate, Follower, Leader, Prospective, Resigned, Unattached, Voted


class TimersMixin(RaftNodeBase):
    def _random_election_timeout(self) -> int:
        timeout = self.config.election_timeout_ms
        return timeout + self.rng.randint(0, timeout)

    def _arm_initial_timers(self, now: int) -> None:
        match self.state:
            case Follower() as s:
                s.fetch_deadline = now + self.config.fetch_timeout_ms
            case Candidate() as s:
                self._election_started_ms = now
                s.election_deadline = now + self._random_election_timeout()
                self._maybe_win_election(now)  # a single voter needs nobody else
            case Unattached() | Voted() | Resigned() as s:
                s.election_deadline = now + self._random_election_timeout()

    def _postpone_election(self, now: int) -> None:
        """The epochs are used up: keep the role and push the deadline that wanted an election, so that
        it fires again only a timeout later (the node stays up, serving what it can)."""
        later = now + self._random_election_timeout()
        match self.state:
            case Unattached() | Voted() | Resigned() | Prospective() as s:
                s.election_deadline = later
            case Follower() as s:
                s.fetch_deadline = now + self.config.fetch_timeout_ms
            case Candidate() as s:
                s.election_deadline = later
                s.backing_off_until = later if s.backing_off_until is not None else None
            case Leader() as s:
                s.fetched_since_check = set()
                s.check_quorum_deadline = now + self.config.fetch_timeout_ms

    def _check_deadlines(self, now: int) -> None:
        for dest, inflight in list(self._inflight.items()):
            if inflight.deadline <= now:
                del self._inflight[dest]
                self._back_off(now, dest)
        if isinstance(self.state, Leader):
            self._complete_parked_fetches(now, expired_only=True)
        match self.state:
            case Unattached(election_deadline=deadline) | Voted(election_deadline=deadline) if deadline <= now:
                if self.is_voter:
                    self._start_election(now)
                else:
                    self.state.election_deadline = now + self._random_election_timeout()
            case Follower(fetch_deadline=deadline) if deadline <= now:
                if self.is_voter:
                    self._start_election(now)
                else:
                    lost = self.state.leader_id
                    self._become_unattached(now, self.epoch)
                    if isinstance(self.state, Unattached):
                        self.state.lost_leader = lost
            case Candidate() as c:
                if c.backing_off_until is not None and c.backing_off_until <= now:
                    self._start_election(now)
                elif c.backing_off_until is None and c.election_deadline <= now:
                    self._election_failed(now)
            case Leader() as leader if leader.check_quorum_deadline <= now:
                # The zombie-leader rule: without Fetches from a majority in a fetch timeout, re-elect.
                if (
                    len(leader.fetched_since_check) + 1 >= self.config.majority
                    or "raft-leader-never-resigns" in self.config.bugs  # KAFKA-15489
                ):
                    leader.fetched_since_check = set()
                    leader.check_quorum_deadline = now + self.config.fetch_timeout_ms
                else:
                    self._start_election(now)
            case Resigned(election_deadline=deadline) if deadline <= now and not self._shutting_down:
                self._start_election(now)
            case Prospective() as p if p.election_deadline <= now and not self._shutting_down:
                self._pre_vote_round_expired(now, p)

    def _next_deadline(self) -> int:
        deadlines = [inflight.deadline for inflight in self._inflight.values()]
        deadlines.extend(until for until in self._backoff_until.values())
        match self.state:
            case Unattached(election_deadline=d) | Voted(election_deadline=d):
                deadlines.append(d)
            case Resigned(election_deadline=d) | Prospective(election_deadline=d) if not self._shutting_down:
                deadlines.append(d)
            case Follower(fetch_deadline=d):
                deadlines.append(d)
            case Candidate() as c:
                deadlines.append(c.backing_off_until if c.backing_off_until is not None else c.election_deadline)
            case Leader(check_quorum_deadline=d, parked=parked):
                deadlines.append(d)
                deadlines.extend(p.deadline for p in parked)
        return min(deadlines, default=NEVER)

    def _arm_timer(self, now: int) -> None:
        # Backoff entries that are past are dead weight: drop them.
        for dest in [d for d, until in self._backoff_until.items() if until <= now]:
            del self._backoff_until[dest]
        deadline = self._next_deadline()
        if deadline != self._timer_armed or deadline <= now:
            self._timer_armed = deadline
            if deadline < NEVER:
                self._out.append(SetTimer(max(deadline, now)))
