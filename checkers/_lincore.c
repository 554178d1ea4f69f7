/* The linearizability search of checkers/linearizable.py (`_search`), compiled, for the register
 * model (read / write / cas; values interned to small ints, nil = 0).
 *
 * It mirrors the Python search step for step: the same candidates in the same order, the same
 * observer shortcut, register pruner, unique-value guard, symmetry, forgetting of values nobody can
 * observe, indeterminate-op rule and memo with dominance on the indeterminate ops used, so it
 * visits the same configurations and reports the same
 * count and the same longest partial linearization. The Python search stays the reference; the tests
 * compare both on every history. The GIL is released while searching (the progress line keeps
 * drawing); signals are checked with the budgets, every 1024 configurations.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef __linux__
#include <sys/mman.h>
#endif

typedef int64_t i64;
typedef uint64_t u64;

enum { K_READ = 0, K_WRITE = 1, K_CAS = 2, K_CASFAIL = 3 };
#define ILL (-1)
#define NONE_VALUE (-2)
#define CHECK_EVERY 1024
enum { R_VALID = 1, R_INVALID = 0, R_TIMEOUT = 2, R_STATES = 3, R_ERROR = -1 };

static inline int step(int kind, int a, int b, int s) {
    switch (kind) {
    case K_READ: return s == a ? s : ILL;
    case K_WRITE: return a;
    case K_CAS: return s == a ? b : ILL;
    default: return s != a ? s : ILL;
    }
}

/* The memo's table and entries are hundreds of MB read at random: with 4 KiB pages most probes also
   miss the TLB. Ask for transparent huge pages on the 2 MiB-aligned inside of a big block (a hint:
   without THP it does nothing). */
static void huge_pages(void *p, size_t bytes) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    const uintptr_t huge = (uintptr_t)1 << 21;
    uintptr_t lo = ((uintptr_t)p + huge - 1) & ~(huge - 1), hi = ((uintptr_t)p + bytes) & ~(huge - 1);
    if (hi > lo) madvise((void *)lo, hi - lo, MADV_HUGEPAGE);
#else
    (void)p; (void)bytes;
#endif
}

/* growable arrays */
typedef struct { u64 *v; size_t n, cap; } U64s;
typedef struct { int *v; size_t n, cap; } Ints;

static int u64s_reserve(U64s *a, size_t extra) {
    if (a->n + extra <= a->cap) return 0;
    size_t cap = a->cap ? a->cap : 1024;
    while (cap < a->n + extra) cap *= 2;
    u64 *v = realloc(a->v, cap * sizeof(u64));
    if (!v) return -1;
    a->v = v; a->cap = cap;
    huge_pages(v, cap * sizeof(u64));
    return 0;
}
static int ints_reserve(Ints *a, size_t extra) {
    if (a->n + extra <= a->cap) return 0;
    size_t cap = a->cap ? a->cap : 1024;
    while (cap < a->n + extra) cap *= 2;
    int *v = realloc(a->v, cap * sizeof(int));
    if (!v) return -1;
    a->v = v; a->cap = cap;
    return 0;
}

typedef struct {
    int lo, state, depth, info_done;
    i64 minret;
    size_t cands_off, ncands, ch_off, nch, k, mask_off;
} Frame;

typedef struct {
    /* ops */
    int n, ni, nv;
    i64 *inv, *ret, *iinv;
    int *kind, *a, *b, *ikind, *ia, *ib;
    char *pure, *blind;
    int use_pruner, use_guard;
    int symmetric;          /* skip an op while an identical one that may go first is pending */
    i64 *sig;               /* per det op: its step (kind, a, b) as one number, for `shadowed` */
    int *isame;             /* per info op: the previous info op with the same step, or -1 */
    int *ob_off, *ob;       /* determinate ops that observe each value (reads, cas from it), ascending */
    int *wrt; int nwrt;     /* determinate writes, ascending */
    char *info_from;        /* per value: some indeterminate cas is from it */
    /* per value: csr lists */
    int *needs;             /* per det op: value it must observe, or NONE_VALUE */
    int *wr_off, *wr;       /* determinate setters of each value, ascending */
    int *iw_off, *iw;       /* indeterminate setters of each value, ascending */
    int *kp_off, *kp;       /* determinate ops that need each value, ascending */
    i64 *info_min;          /* earliest invoke of an indeterminate setter of each value */
    /* search */
    int W, WI;              /* words of the determinate window mask, of the indeterminate mask */
    size_t E;               /* words per memo entry: key word, W mask words, imask list head */
    U64s entries, inodes, isets;
    u64 *table; size_t tcap, count;
    uint32_t *istab; size_t iscap, niset;
} S;

static inline int bit(const u64 *m, int W, i64 k) {
    if (k < 0 || k >= (i64)W * 64) return 0;
    return (int)((m[k >> 6] >> (k & 63)) & 1);
}

/* Unlinearized determinate setters of v (index >= lo, not in dm) invoked by `deadline`, counted up
   to `enough`. */
static int open_setters(S *s, int v, int lo, const u64 *dm, i64 deadline, int enough) {
    int lo_i = s->wr_off[v], hi_i = s->wr_off[v + 1], got = 0;
    /* bisect_left(ws, lo) */
    while (lo_i < hi_i) {
        int mid = (lo_i + hi_i) / 2;
        if (s->wr[mid] < lo) lo_i = mid + 1; else hi_i = mid;
    }
    for (int k = lo_i; k < s->wr_off[v + 1] && got < enough; k++) {
        int w = s->wr[k];
        if (s->inv[w] > deadline) break;
        if (!bit(dm, s->W, w - lo)) got++;
    }
    return got;
}

static int pending_setter(S *s, int v, int lo, const u64 *dm, i64 deadline) {
    return open_setters(s, v, lo, dm, deadline, 1);
}

/* How many ops may begin a fresh stretch of value v by `deadline`: the state itself if it is v,
   unlinearized determinate setters and indeterminate ones invoked by then (linearized or not: an
   upper bound). Counting stops at `enough`. */
static int setters_by(S *s, int v, int state, int lo, const u64 *dm, i64 deadline, int enough) {
    int got = state == v;
    if (got < enough) got += open_setters(s, v, lo, dm, deadline, enough - got);
    for (int k = s->iw_off[v]; k < s->iw_off[v + 1] && got < enough; k++) {
        if (s->iinv[s->iw[k]] > deadline) break;
        got++;
    }
    return got;
}

static int doomed(S *s, int state, int lo, const u64 *dm, const int *cands, size_t nc) {
    for (size_t i = 0; i < nc; i++) {
        int c = cands[i];
        int v = s->needs[c];
        if (v == NONE_VALUE || v == state) continue;
        i64 deadline = s->ret[c];
        if (pending_setter(s, v, lo, dm, deadline)) continue;
        if (s->info_min[v] > deadline) return c;
    }
    /* Successful cas from v (to another value) each end a stretch of v, so the k-th of them by
       deadline needs k stretches begun by then (Hall's condition for matching them to setters). */
    for (size_t i = 0; i < nc; i++) {
        int c = cands[i];
        if (s->kind[c] != K_CAS || s->a[c] == s->b[c]) continue;
        int v = s->a[c], k = 0;
        for (size_t j = 0; j <= i; j++) {
            int x = cands[j];
            k += s->kind[x] == K_CAS && s->a[x] == v && s->b[x] != v;
        }
        if (k >= 2 && setters_by(s, v, state, lo, dm, s->ret[c], k) < k) return c;
    }
    return -1;
}

static int blocked(S *s, int state, int lo, const u64 *dm, int c) {
    if (state < 0 || state >= s->nv) return 0;
    for (int k = s->kp_off[state]; k < s->kp_off[state + 1]; k++) {
        int x = s->kp[k];
        if (x >= lo && x != c && !bit(dm, s->W, x - lo)) return 1;
    }
    return 0;
}

/* Symmetry (issue 29): ops x and c with the same step (kind, a, b), x invoked no later and returning
   no later than c, can swap places in any linearization that has c first and it stays one (x may go
   where c was: it was invoked by then; c may go where x was: it has not returned by then). So c need
   not be tried while x is pending; with small repeated values this cuts the orders of equal writes. */
static int shadowed(S *s, const int *cands, size_t nc, int c) {
    i64 mine = s->sig[c], r = s->ret[c];
    for (size_t i = 0; i < nc; i++) {
        int x = cands[i];
        if (x < c && s->sig[x] == mine && s->ret[x] <= r) return 1;
    }
    return 0;
}

/* The same for indeterminate ops (open to the end): the earliest invoked of equal ones goes first.
   An equal one invoked earlier is available whenever j is (invoked no later), so j waits exactly when
   one of them is not yet linearized: walk the chain of earlier equal ones. */
static int info_shadowed(S *s, const u64 *im, int j) {
    for (int x = s->isame[j]; x >= 0; x = s->isame[x])
        if (!bit(im, s->WI, x)) return 1;
    return 0;
}

/* Forgetting a value nobody can observe (register_search.forgetter): state v becomes the one state
   "forgotten" (id nv) when no indeterminate cas is from v and the earliest unlinearized op observing v
   was invoked after some unlinearized write returned, or there is none. */
static int forget(S *s, int state, int lo, const u64 *dm) {
    if (state >= s->nv || s->info_from[state]) return state;
    int lo_i = s->ob_off[state], hi_i = s->ob_off[state + 1], first = -1;
    while (lo_i < hi_i) {
        int mid = (lo_i + hi_i) / 2;
        if (s->ob[mid] < lo) lo_i = mid + 1; else hi_i = mid;
    }
    for (int k = lo_i; k < s->ob_off[state + 1]; k++)
        if (!bit(dm, s->W, s->ob[k] - lo)) { first = s->ob[k]; break; }
    if (first < 0) return s->nv;
    i64 limit = s->inv[first];
    lo_i = 0; hi_i = s->nwrt;
    while (lo_i < hi_i) {
        int mid = (lo_i + hi_i) / 2;
        if (s->wrt[mid] < lo) lo_i = mid + 1; else hi_i = mid;
    }
    for (int k = lo_i; k < s->nwrt; k++) {
        int w = s->wrt[k];
        if (s->inv[w] >= limit) break;
        if (s->ret[w] < limit && !bit(dm, s->W, w - lo)) return s->nv;
    }
    return state;
}

static inline u64 mix(u64 h) {
    h ^= h >> 33; h *= 0xff51afd7ed558ccdULL; h ^= h >> 33; h *= 0xc4ceb9fe1a85ec53ULL; h ^= h >> 33;
    return h;
}

static u64 hash_key(S *s, u64 kw, const u64 *dm) {
    u64 h = mix(kw);
    for (int i = 0; i < s->W; i++) h = mix(h ^ (dm[i] + 0x9e3779b97f4a7c15ULL * (u64)(i + 1)));
    return h;
}

static u64 hash_words(const u64 *w, int n) {
    u64 h = 0x243f6a8885a308d3ULL;
    for (int i = 0; i < n; i++) h = mix(h ^ (w[i] + 0x9e3779b97f4a7c15ULL * (u64)(i + 1)));
    return h;
}

/* The memo, compact (issue 29: a hard key needs millions of configurations): an open-addressing
   table of entry numbers, each slot with the upper half of the entry's hash beside it so that a probe
   of another entry rarely has to read it (the lookups are cache misses: most of the search's time);
   an entry is its key word (lo, state), its W window words and the head of its list of
   indeterminate-op sets; the sets are interned once (few differ), so a list node is one word,
   (next node + 1) << 32 | set number. */
#define EMPTY32 UINT32_MAX
#define SLOT_EMPTY UINT64_MAX

static int grow32(uint32_t **tab, size_t *cap, size_t count, u64 (*key_of)(S *, size_t), S *s) {
    size_t ncap = *cap ? *cap * 2 : 1 << 12;
    uint32_t *t = malloc(ncap * sizeof(uint32_t));
    if (!t) return -1;
    memset(t, 0xff, ncap * sizeof(uint32_t));
    for (size_t e = 0; e < count; e++) {
        size_t h = key_of(s, e) & (ncap - 1);
        while (t[h] != EMPTY32) h = (h + 1) & (ncap - 1);
        t[h] = (uint32_t)e;
    }
    free(*tab);
    *tab = t; *cap = ncap;
    return 0;
}

static u64 entry_hash(S *s, size_t e) {
    u64 *ent = s->entries.v + e * s->E;
    return hash_key(s, ent[0], ent + 1);
}

static u64 iset_hash(S *s, size_t k) { return hash_words(s->isets.v + k * s->WI, s->WI); }

/* the number of info-op set `im`, interned; -1: out of memory */
static i64 iset_id(S *s, const u64 *im) {
    if (s->WI == 0) return 0;
    if ((s->niset + 1) * 2 > s->iscap && grow32(&s->istab, &s->iscap, s->niset, iset_hash, s) < 0) return -1;
    size_t h = hash_words(im, s->WI) & (s->iscap - 1);
    while (s->istab[h] != EMPTY32) {
        if (memcmp(s->isets.v + (size_t)s->istab[h] * s->WI, im, s->WI * sizeof(u64)) == 0) return s->istab[h];
        h = (h + 1) & (s->iscap - 1);
    }
    if (s->niset >= EMPTY32 - 1 || u64s_reserve(&s->isets, s->WI) < 0) return -1;
    memcpy(s->isets.v + s->niset * s->WI, im, s->WI * sizeof(u64));
    s->isets.n += s->WI;
    s->istab[h] = (uint32_t)s->niset;
    return (i64)s->niset++;
}

/* 1: new configuration (recorded), 0: dominated (skip), -1: out of memory */
static int table_grow(S *s) {
    size_t cap = s->tcap ? s->tcap * 2 : 1 << 12;
    u64 *t = malloc(cap * sizeof(u64));
    if (!t) return -1;
    huge_pages(t, cap * sizeof(u64));
    memset(t, 0xff, cap * sizeof(u64));
    for (size_t i = 0; i < s->tcap; i++) {
        u64 slot = s->table[i];
        if (slot == SLOT_EMPTY) continue;
        size_t h = entry_hash(s, (uint32_t)slot) & (cap - 1);
        while (t[h] != SLOT_EMPTY) h = (h + 1) & (cap - 1);
        t[h] = slot;
    }
    free(s->table);
    s->table = t; s->tcap = cap;
    return 0;
}

static int memo(S *s, int lo, int state, const u64 *dm, const u64 *im) {
    if ((s->count + 1) * 2 > s->tcap && table_grow(s) < 0) return -1;
    if (s->count >= EMPTY32 - 1) return -1;
    u64 kw = ((u64)(uint32_t)lo << 32) | (uint32_t)state;
    u64 hash = hash_key(s, kw, dm), tag = hash >> 32 << 32;
    size_t h = hash & (s->tcap - 1);
    u64 *ent = NULL;
    while (s->table[h] != SLOT_EMPTY) {
        u64 slot = s->table[h];
        if ((slot & 0xffffffff00000000ULL) == tag) {
            u64 *e = s->entries.v + (size_t)(uint32_t)slot * s->E;
            if (e[0] == kw && memcmp(e + 1, dm, s->W * sizeof(u64)) == 0) { ent = e; break; }
        }
        h = (h + 1) & (s->tcap - 1);
    }
    if (ent) { /* seen: dominated if some recorded set of info ops is a subset of this one */
        u64 node = ent[1 + s->W];
        while (node) {
            u64 link = s->inodes.v[node - 1];
            const u64 *q = s->isets.v + (size_t)(uint32_t)link * s->WI;
            int subset = 1;
            for (int i = 0; i < s->WI; i++)
                if (q[i] & ~im[i]) { subset = 0; break; }
            if (subset) return 0;
            node = link >> 32;
        }
    }
    i64 id = iset_id(s, im);
    if (id < 0 || s->inodes.n >= EMPTY32 - 1 || u64s_reserve(&s->inodes, 1) < 0) return -1;
    if (!ent) {
        if (u64s_reserve(&s->entries, s->E) < 0) return -1;
        ent = s->entries.v + s->count * s->E;
        ent[0] = kw;
        memcpy(ent + 1, dm, s->W * sizeof(u64));
        ent[1 + s->W] = 0;
        s->entries.n += s->E;
        s->table[h] = tag | (u64)s->count;
        s->count++;
    }
    s->inodes.v[s->inodes.n++] = (ent[1 + s->W] << 32) | (u64)id;
    ent[1 + s->W] = s->inodes.n; /* node number + 1; 0 ends the list */
    return 1;
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* the indeterminate ops worth linearizing next (see `_info_children`), appended as (n + j, state) */
static int info_children(S *s, Ints *ar, const int *cands, size_t nc, const u64 *im, int state, i64 minret,
                         Ints *scratch) {
    scratch->n = 0;
    int n = s->n;
    for (int j = 0; j < s->ni && s->iinv[j] <= minret; j++)
        if (!bit(im, s->WI, j)) {
            if (ints_reserve(scratch, 1) < 0) return -1;
            scratch->v[scratch->n++] = j;
        }
    size_t navail = scratch->n;
    /* nexts: determinate candidates that are not blind, then available indeterminate ops (n + k) */
    for (size_t i = 0; i < nc; i++)
        if (!s->blind[cands[i]]) {
            if (ints_reserve(scratch, 1) < 0) return -1;
            scratch->v[scratch->n++] = cands[i];
        }
    for (size_t i = 0; i < navail; i++)
        if (!s->blind[n + scratch->v[i]]) {
            if (ints_reserve(scratch, 1) < 0) return -1;
            scratch->v[scratch->n++] = n + scratch->v[i];
        }
    for (size_t i = 0; i < navail; i++) {
        int j = scratch->v[i];
        int sj = step(s->ikind[j], s->ia[j], s->ib[j], state);
        if (sj == ILL || sj == state) continue;
        if (s->symmetric && info_shadowed(s, im, j)) continue;
        for (size_t t = navail; t < scratch->n; t++) {
            int y = scratch->v[t];
            if (y == n + j) continue;
            int kind = y < n ? s->kind[y] : s->ikind[y - n];
            int ya = y < n ? s->a[y] : s->ia[y - n], yb = y < n ? s->b[y] : s->ib[y - n];
            int after = step(kind, ya, yb, sj);
            if (after != ILL) {
                int before = step(kind, ya, yb, state);
                if (before == ILL || before != after) {
                    if (ints_reserve(ar, 2) < 0) return -1;
                    ar->v[ar->n++] = n + j;
                    ar->v[ar->n++] = sj;
                    break;
                }
            }
        }
    }
    return 0;
}

/* The order children are tried in (register_search.urgent_first): those leaving the value that the
   candidate with the earliest deadline needs go first, the rest keep their order. Only the order. */
static int urgent_first(S *s, Ints *ar, size_t ch_off, size_t nch, int first, int state, Ints *tmp) {
    int want = s->needs[first];
    if (want == NONE_VALUE || want == state) return 0;
    tmp->n = 0;
    if (ints_reserve(tmp, 2 * nch) < 0) return -1;
    for (int pass = 0; pass < 2; pass++)
        for (size_t k = 0; k < nch; k++) {
            int c = ar->v[ch_off + 2 * k], ns = ar->v[ch_off + 2 * k + 1];
            if ((c != first && ns == want) == (pass == 0)) {
                tmp->v[tmp->n++] = c;
                tmp->v[tmp->n++] = ns;
            }
        }
    memcpy(ar->v + ch_off, tmp->v, sizeof(int) * 2 * nch);
    return 0;
}

static void shift_right(u64 *m, int W, int k) {
    /* m >>= k, k >= 1 */
    int words = k >> 6, bits = k & 63;
    for (int i = 0; i < W; i++) {
        u64 lo = i + words < W ? m[i + words] : 0;
        u64 hi = i + words + 1 < W ? m[i + words + 1] : 0;
        m[i] = bits ? (lo >> bits) | (hi << (64 - bits)) : lo;
    }
}

static int search(S *s, double deadline, i64 max_states, int **best_out, int *best_len, i64 *states_out) {
    int n = s->n, W = s->W, WI = s->WI;
    size_t MW = (size_t)W + WI;
    U64s masks = {0};
    Ints ar = {0}, scratch = {0};
    Frame *stack = NULL;
    size_t sp = 0, scap = 0;
    int *path = malloc(sizeof(int) * (n + s->ni + 1));
    int *best = malloc(sizeof(int) * (n + s->ni + 1));
    u64 *cur = calloc(MW ? MW : 1, sizeof(u64));
    int rc = R_ERROR;
    if (!path || !best || !cur) goto done;
    int lo = 0, state = 0, depth = 0, best_depth = -1, best_live = 0;
    i64 nodes = 0, check_at = CHECK_EVERY;
    for (;;) {
        /* expand the current configuration */
        if (lo == n) { rc = R_VALID; goto done; }
        nodes++;
        if (nodes >= check_at) {
            check_at += CHECK_EVERY;
            if (now() > deadline) { rc = R_TIMEOUT; goto done; }
            if ((i64)s->count > max_states) { rc = R_STATES; goto done; }
            PyGILState_STATE g = PyGILState_Ensure();
            int sig = PyErr_CheckSignals();
            PyGILState_Release(g);
            if (sig < 0) { rc = R_ERROR; goto done; }
        }
        if (depth > best_depth) { best_depth = depth; best_live = 1; }
        /* candidates */
        size_t cands_off = ar.n;
        i64 minret = INT64_MAX;
        for (int i = lo; i < n; i++) {
            if (s->inv[i] > minret) break;
            if (!bit(cur, W, i - lo)) {
                if (ints_reserve(&ar, 1) < 0) goto done;
                ar.v[ar.n++] = i;
                if (s->ret[i] < minret) minret = s->ret[i];
            }
        }
        size_t nc = ar.n - cands_off;
        if (nc > 1) {
            size_t m = 0;
            for (size_t i = 0; i < nc; i++) {
                int c = ar.v[cands_off + i];
                if (s->inv[c] <= minret) ar.v[cands_off + m++] = c;
            }
            nc = m;
            ar.n = cands_off + nc;
            for (size_t i = 1; i < nc; i++) { /* stable insertion sort by return time */
                int c = ar.v[cands_off + i];
                size_t j = i;
                while (j > 0 && s->ret[ar.v[cands_off + j - 1]] > s->ret[c]) {
                    ar.v[cands_off + j] = ar.v[cands_off + j - 1];
                    j--;
                }
                ar.v[cands_off + j] = c;
            }
        }
        int forced = 0;
        if (s->use_pruner && doomed(s, state, lo, cur, ar.v + cands_off, nc) >= 0) {
            nc = 0;
            ar.n = cands_off;
            forced = 1;
        }
        size_t ch_off = ar.n, nch = 0;
        for (size_t i = 0; i < nc; i++) {
            int c = ar.v[cands_off + i];
            int ns = step(s->kind[c], s->a[c], s->b[c], state);
            if (ns == ILL) continue;
            if (s->symmetric && shadowed(s, ar.v + cands_off, nc, c)) continue;
            if (s->pure[c]) {
                ar.n = ch_off;
                if (ints_reserve(&ar, 2) < 0) goto done;
                ar.v[ar.n++] = c; ar.v[ar.n++] = ns;
                nch = 1;
                forced = 1;
                break;
            }
            if (s->use_guard && ns != state && blocked(s, state, lo, cur, c)) continue;
            if (ints_reserve(&ar, 2) < 0) goto done;
            ar.v[ar.n++] = c; ar.v[ar.n++] = ns;
            nch++;
        }
        if (s->symmetric && nch > 1 && urgent_first(s, &ar, ch_off, nch, ar.v[cands_off], state, &scratch) < 0)
            goto done;
        if (sp == scap) {
            size_t ncap = scap ? scap * 2 : 256;
            Frame *ns = realloc(stack, ncap * sizeof(Frame));
            if (!ns) goto done;
            stack = ns; scap = ncap;
        }
        if (u64s_reserve(&masks, MW) < 0) goto done;
        Frame *f = &stack[sp++];
        f->lo = lo; f->state = state; f->depth = depth; f->minret = minret;
        f->info_done = forced || s->ni == 0;
        f->cands_off = cands_off; f->ncands = nc; f->ch_off = ch_off; f->nch = nch; f->k = 0;
        f->mask_off = masks.n;
        memcpy(masks.v + masks.n, cur, MW * sizeof(u64));
        masks.n += MW;
        /* move to the next unexplored child, backtracking as needed */
        for (;;) {
            if (sp == 0) { rc = R_INVALID; goto done; }
            f = &stack[sp - 1];
            if (f->k == f->nch) {
                if (f->info_done) {
                    ar.n = f->cands_off;
                    masks.n = f->mask_off;
                    sp--;
                    continue;
                }
                f->info_done = 1;
                u64 *fm = masks.v + f->mask_off;
                if (!s->use_guard || !blocked(s, f->state, f->lo, fm, -1)) {
                    size_t before = ar.n;
                    if (info_children(s, &ar, ar.v + f->cands_off, f->ncands, fm + W, f->state, f->minret,
                                      &scratch) < 0)
                        goto done;
                    f->nch += (ar.n - before) / 2;
                }
                continue;
            }
            size_t k = f->k++;
            int c = ar.v[f->ch_off + 2 * k], ns = ar.v[f->ch_off + 2 * k + 1];
            int nlo = f->lo;
            memcpy(cur, masks.v + f->mask_off, MW * sizeof(u64));
            if (c < n) {
                int off = c - nlo;
                cur[off >> 6] |= (u64)1 << (off & 63);
                int sh = 0;
                while (bit(cur, W, sh)) sh++;
                if (sh) { shift_right(cur, W, sh); nlo += sh; }
            } else {
                int j = c - n;
                cur[W + (j >> 6)] |= (u64)1 << (j & 63);
            }
            if (s->symmetric) ns = forget(s, ns, nlo, cur);
            int fresh = memo(s, nlo, ns, cur, cur + W);
            if (fresh < 0) goto done;
            if (!fresh) continue;
            if (best_live && f->depth < best_depth) {
                memcpy(best, path, sizeof(int) * best_depth);
                best_live = 0;
            }
            path[f->depth] = c;
            lo = nlo; state = ns; depth = f->depth + 1;
            break;
        }
    }
done:
    if (rc != R_ERROR && rc != R_VALID) {
        if (best_live) memcpy(best, path, sizeof(int) * (best_depth > 0 ? best_depth : 0));
        *best_out = best; best = NULL;
        *best_len = best_depth > 0 ? best_depth : 0;
    } else if (rc == R_VALID) {
        *best_out = path; path = NULL;
        *best_len = depth;
    }
    *states_out = (i64)s->count;
    free(path); free(best); free(cur); free(stack);
    free(masks.v); free(ar.v); free(scratch.v);
    return rc;
}

static int load_i64(PyObject *list, i64 **out, Py_ssize_t *len) {
    PyObject *seq = PySequence_Fast(list, "expected a sequence of ints");
    if (!seq) return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    i64 *v = malloc(sizeof(i64) * (n ? n : 1));
    if (!v) { Py_DECREF(seq); PyErr_NoMemory(); return -1; }
    for (Py_ssize_t i = 0; i < n; i++) {
        v[i] = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(seq, i));
        if (v[i] == -1 && PyErr_Occurred()) { free(v); Py_DECREF(seq); return -1; }
    }
    Py_DECREF(seq);
    *out = v; *len = n;
    return 0;
}

static int load_int(PyObject *list, int **out, Py_ssize_t want) {
    i64 *v; Py_ssize_t n;
    if (load_i64(list, &v, &n) < 0) return -1;
    if (n != want) { free(v); PyErr_SetString(PyExc_ValueError, "arrays of different lengths"); return -1; }
    int *r = malloc(sizeof(int) * (n ? n : 1));
    if (!r) { free(v); PyErr_NoMemory(); return -1; }
    for (Py_ssize_t i = 0; i < n; i++) r[i] = (int)v[i];
    free(v);
    *out = r;
    return 0;
}

static int build_csr(int nv, int count, const int *val_of, int **off_out, int **list_out) {
    int *off = calloc(nv + 1, sizeof(int)), *list = malloc(sizeof(int) * (count ? count : 1));
    if (!off || !list) { free(off); free(list); return -1; }
    for (int i = 0; i < count; i++) if (val_of[i] >= 0) off[val_of[i] + 1]++;
    for (int v = 0; v < nv; v++) off[v + 1] += off[v];
    int *fill = malloc(sizeof(int) * (nv ? nv : 1));
    if (!fill) { free(off); free(list); return -1; }
    memcpy(fill, off, sizeof(int) * nv);
    for (int i = 0; i < count; i++) if (val_of[i] >= 0) list[fill[val_of[i]]++] = i;
    free(fill);
    *off_out = off; *list_out = list;
    return 0;
}

/* search(inv, ret, kind, a, b, pure, iinv, ikind, ia, ib, blind, nvalues, use_pruner, use_guard,
 *        deadline, max_states) -> (result, states, path) */
static PyObject *py_search(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *inv, *ret, *kind, *a, *b, *pure, *iinv, *ikind, *ia, *ib, *blind;
    int nv, use_pruner, use_guard, symmetric = 0;
    double deadline;
    long long max_states;
    if (!PyArg_ParseTuple(args, "OOOOOOOOOOOiiidL|i", &inv, &ret, &kind, &a, &b, &pure, &iinv, &ikind, &ia, &ib,
                          &blind, &nv, &use_pruner, &use_guard, &deadline, &max_states, &symmetric))
        return NULL;
    S s;
    memset(&s, 0, sizeof s);
    Py_ssize_t n, ni, tmp;
    int *pure_i = NULL, *blind_i = NULL, *setter = NULL, *needv = NULL, *isetter = NULL;
    PyObject *result = NULL;
    if (load_i64(inv, &s.inv, &n) < 0 || load_i64(ret, &s.ret, &tmp) < 0) goto out;
    if (tmp != n) { PyErr_SetString(PyExc_ValueError, "arrays of different lengths"); goto out; }
    if (load_i64(iinv, &s.iinv, &ni) < 0) goto out;
    s.n = (int)n; s.ni = (int)ni; s.nv = nv;
    if (load_int(kind, &s.kind, n) < 0 || load_int(a, &s.a, n) < 0 || load_int(b, &s.b, n) < 0 ||
        load_int(pure, &pure_i, n) < 0 || load_int(ikind, &s.ikind, ni) < 0 || load_int(ia, &s.ia, ni) < 0 ||
        load_int(ib, &s.ib, ni) < 0 || load_int(blind, &blind_i, n + ni) < 0)
        goto out;
    s.pure = malloc(n + 1); s.blind = malloc(n + ni + 1);
    s.needs = malloc(sizeof(int) * (n + 1)); setter = malloc(sizeof(int) * (n + 1));
    needv = malloc(sizeof(int) * (n + 1)); s.info_min = malloc(sizeof(i64) * (nv + 1));
    if (!s.pure || !s.blind || !s.needs || !setter || !needv || !s.info_min) { PyErr_NoMemory(); goto out; }
    for (Py_ssize_t i = 0; i < n; i++) s.pure[i] = (char)pure_i[i];
    for (Py_ssize_t i = 0; i < n + ni; i++) s.blind[i] = (char)blind_i[i];
    for (Py_ssize_t i = 0; i < n; i++) {
        int k = s.kind[i];
        s.needs[i] = (k == K_READ || k == K_CAS) ? s.a[i] : NONE_VALUE;
        needv[i] = s.needs[i] == NONE_VALUE ? -1 : s.needs[i];
        setter[i] = k == K_WRITE ? s.a[i] : k == K_CAS ? s.b[i] : -1;
        if ((needv[i] >= nv) || (setter[i] >= nv) || s.a[i] < 0 || s.b[i] < 0) {
            PyErr_SetString(PyExc_ValueError, "value id out of range");
            goto out;
        }
    }
    for (int v = 0; v < nv; v++) s.info_min[v] = INT64_MAX;
    for (Py_ssize_t j = 0; j < ni; j++) {
        int v = s.ikind[j] == K_WRITE ? s.ia[j] : s.ib[j];
        if (v < 0 || v >= nv) { PyErr_SetString(PyExc_ValueError, "value id out of range"); goto out; }
        if (s.iinv[j] < s.info_min[v]) s.info_min[v] = s.iinv[j];
    }
    isetter = malloc(sizeof(int) * (ni + 1));
    if (!isetter) { PyErr_NoMemory(); goto out; }
    for (Py_ssize_t j = 0; j < ni; j++) isetter[j] = s.ikind[j] == K_WRITE ? s.ia[j] : s.ib[j];
    if (build_csr(nv, (int)n, setter, &s.wr_off, &s.wr) < 0 || build_csr(nv, (int)n, needv, &s.kp_off, &s.kp) < 0 ||
        build_csr(nv, (int)ni, isetter, &s.iw_off, &s.iw) < 0) {
        PyErr_NoMemory();
        goto out;
    }
    s.use_pruner = use_pruner; s.use_guard = use_guard; s.symmetric = symmetric;
    s.sig = malloc(sizeof(i64) * (n + 1)); s.isame = malloc(sizeof(int) * (ni + 1));
    if (!s.sig || !s.isame) { PyErr_NoMemory(); goto out; }
    for (Py_ssize_t i = 0; i < n; i++) s.sig[i] = ((i64)s.kind[i] * nv + s.a[i]) * nv + s.b[i];
    int *obv = malloc(sizeof(int) * (n + 1));
    s.wrt = malloc(sizeof(int) * (n + 1)); s.info_from = calloc(nv + 1, 1);
    if (!obv || !s.wrt || !s.info_from) { free(obv); PyErr_NoMemory(); goto out; }
    for (Py_ssize_t i = 0; i < n; i++) {
        if (s.a[i] >= nv) { free(obv); PyErr_SetString(PyExc_ValueError, "value id out of range"); goto out; }
        obv[i] = s.kind[i] == K_WRITE ? -1 : s.a[i];
        if (s.kind[i] == K_WRITE) s.wrt[s.nwrt++] = (int)i;
    }
    for (Py_ssize_t j = 0; j < ni; j++)
        if (s.ikind[j] == K_CAS) {
            if (s.ia[j] < 0 || s.ia[j] >= nv) { PyErr_SetString(PyExc_ValueError, "value id out of range"); goto out; }
            s.info_from[s.ia[j]] = 1;
        }
    int obrc = build_csr(nv, (int)n, obv, &s.ob_off, &s.ob);
    free(obv);
    if (obrc < 0) { PyErr_NoMemory(); goto out; }
    for (Py_ssize_t j = 0; j < ni; j++) {
        s.isame[j] = -1;
        for (Py_ssize_t x = j - 1; x >= 0; x--)
            if (s.ikind[x] == s.ikind[j] && s.ia[x] == s.ia[j] && s.ib[x] == s.ib[j]) { s.isame[j] = (int)x; break; }
    }
    /* the window: a linearized op beyond `lo` was invoked before `lo` returned */
    int width = 1;
    for (Py_ssize_t i = 0, j = 0; i < n; i++) {
        if (j < i) j = i;
        while (j < n && s.inv[j] <= s.ret[i]) j++;
        if (j - i > width) width = (int)(j - i);
    }
    s.W = (width + 64) / 64;
    s.WI = ((int)ni + 63) / 64;
    s.E = 2 + (size_t)s.W;
    int *best = NULL, best_len = 0;
    i64 states = 0;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = search(&s, deadline, max_states, &best, &best_len, &states);
    Py_END_ALLOW_THREADS
    if (rc == R_ERROR) {
        free(best);
        if (!PyErr_Occurred()) PyErr_NoMemory();
        goto out;
    }
    PyObject *path = PyList_New(best_len);
    if (!path) { free(best); goto out; }
    for (int i = 0; i < best_len; i++) PyList_SET_ITEM(path, i, PyLong_FromLong(best[i]));
    free(best);
    result = Py_BuildValue("iLN", rc, (long long)states, path);
out:
    free(s.inv); free(s.ret); free(s.iinv); free(s.kind); free(s.a); free(s.b); free(s.ikind); free(s.ia);
    free(s.ib); free(s.pure); free(s.blind); free(s.needs); free(s.wr_off); free(s.wr); free(s.kp_off); free(s.kp);
    free(s.info_min); free(pure_i); free(blind_i); free(setter); free(needv); free(isetter); free(s.iw_off); free(s.iw);
    free(s.sig); free(s.isame); free(s.ob_off); free(s.ob); free(s.wrt); free(s.info_from);
    free(s.entries.v); free(s.inodes.v); free(s.table); free(s.isets.v); free(s.istab);
    return result;
}


/* ---- the history loader's fast path ---------------------------------------------------------------
 * load(data, Op, loads) decodes a whole JSONL history and pairs it (checkers/history.py `_pair_rows`)
 * without making a dict per event: (ops, nemesis rows) or None. None means "not the common shape, or
 * something is wrong": the Python loader then reads the file and names any bad line. The common shape:
 * one object per line, integer index / time, integer processes (or "nemesis"), a known type, string
 * f / node. Values that are not flat (objects, nested arrays, escaped strings, floats) are decoded by
 * `loads` from their own bytes. Op objects are filled slot by slot (they are frozen dataclasses). */

#include <structmember.h>

enum { F_ID, F_PROCESS, F_F, F_KEY, F_INVOKE_VALUE, F_VALUE, F_TYPE, F_INVOKE_TIME, F_COMPLETE_TIME,
       F_INVOKE_INDEX, F_COMPLETE_INDEX, F_NODE, F_ERROR, F_GAVE_UP_TIME, F_COUNT };
/* every slot of checkers.history.Op, in order: the module exports them as OP_FIELDS, and the Python
   side uses `load` only when they match (an extension built before a field was added leaves it unset) */
static const char *OP_FIELDS[F_COUNT] = {"id", "process", "f", "key", "invoke_value", "value", "type",
                                         "invoke_time", "complete_time", "invoke_index", "complete_index",
                                         "node", "error", "gave_up_time"};
enum { T_INVOKE, T_OK, T_FAIL, T_INFO };
static PyObject *TYPE_NAMES[4];

typedef struct { const char *p, *end; } Cur;

static inline void skip_ws(Cur *c) {
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\r')) c->p++;
}

/* the end of the JSON value at c->p (strings, nesting); NULL if malformed */
static const char *value_end(const char *p, const char *end) {
    int depth = 0;
    while (p < end) {
        char ch = *p;
        if (ch == '"') {
            p++;
            while (p < end && *p != '"') p += (*p == '\\') ? 2 : 1;
            if (p >= end) return NULL;
            p++;
        } else if (ch == '{' || ch == '[') {
            depth++; p++;
        } else if (ch == '}' || ch == ']') {
            if (depth == 0) return p;
            depth--; p++;
        } else if (ch == ',' && depth == 0) {
            return p;
        } else {
            p++;
        }
        if (depth == 0 && (ch == '"' || ch == '}' || ch == ']')) {
            /* a complete string or container at top level */
            return p;
        }
    }
    return depth == 0 ? p : NULL;
}

/* a plain integer literal: 1 and the value, 0 if the token is something else */
static int plain_int(Cur *c, i64 *out) {
    const char *p = c->p;
    int neg = 0;
    if (p < c->end && *p == '-') { neg = 1; p++; }
    const char *digits = p;
    i64 v = 0;
    while (p < c->end && *p >= '0' && *p <= '9') {
        if (p - digits >= 18) return 0;
        v = v * 10 + (*p - '0');
        p++;
    }
    if (p == digits || (*digits == '0' && p - digits > 1)) return 0; /* (JSON has no leading zeros) */
    if (p < c->end && (*p == '.' || *p == 'e' || *p == 'E')) return 0;
    c->p = p;
    *out = neg ? -v : v;
    return 1;
}

/* a string without escapes, as bytes [s, s + n); 0 if it has escapes or is no string */
static int plain_str(Cur *c, const char **s, Py_ssize_t *n) {
    if (c->p >= c->end || *c->p != '"') return 0;
    const char *p = c->p + 1;
    const char *q = memchr(p, '"', c->end - p);
    if (!q || memchr(p, '\\', q - p)) return 0;
    *s = p; *n = q - p;
    c->p = q + 1;
    return 1;
}

static PyObject *str_of(const char *s, Py_ssize_t n) {
    PyObject *u = PyUnicode_DecodeUTF8(s, n, NULL);
    if (u && n <= 32) PyUnicode_InternInPlace(&u);
    return u;
}

/* any JSON value as a Python object (new reference); NULL with no exception set: not decodable here */
static PyObject *json_value(Cur *c, PyObject *loads) {
    if (c->p >= c->end) return NULL;
    char ch = *c->p;
    i64 iv;
    const char *s;
    Py_ssize_t n;
    if (ch == 'n' && c->end - c->p >= 4 && memcmp(c->p, "null", 4) == 0) { c->p += 4; Py_RETURN_NONE; }
    if (ch == 't' && c->end - c->p >= 4 && memcmp(c->p, "true", 4) == 0) { c->p += 4; Py_RETURN_TRUE; }
    if (ch == 'f' && c->end - c->p >= 5 && memcmp(c->p, "false", 5) == 0) { c->p += 5; Py_RETURN_FALSE; }
    if ((ch == '-' || (ch >= '0' && ch <= '9')) && plain_int(c, &iv)) return PyLong_FromLongLong(iv);
    if (ch == '"' && plain_str(c, &s, &n)) return str_of(s, n);
    if (ch == '[') { /* a flat array of ints, strings, null */
        Cur save = *c;
        PyObject *list = PyList_New(0);
        if (!list) return NULL;
        c->p++;
        skip_ws(c);
        if (c->p < c->end && *c->p == ']') { c->p++; return list; }
        for (;;) {
            skip_ws(c);
            PyObject *item = NULL;
            char e = c->p < c->end ? *c->p : 0;
            if (e == 'n' && c->end - c->p >= 4 && memcmp(c->p, "null", 4) == 0) {
                c->p += 4; item = Py_NewRef(Py_None);
            } else if ((e == '-' || (e >= '0' && e <= '9')) && plain_int(c, &iv)) {
                item = PyLong_FromLongLong(iv);
            } else if (e == '"' && plain_str(c, &s, &n)) {
                item = str_of(s, n);
            }
            if (!item) { Py_DECREF(list); *c = save; goto generic; }
            int rc = PyList_Append(list, item);
            Py_DECREF(item);
            if (rc < 0) { Py_DECREF(list); return NULL; }
            skip_ws(c);
            if (c->p < c->end && *c->p == ',') { c->p++; continue; }
            if (c->p < c->end && *c->p == ']') { c->p++; return list; }
            Py_DECREF(list); *c = save; goto generic;
        }
    }
generic: {
        const char *stop = value_end(c->p, c->end);
        if (!stop || stop == c->p) return NULL;
        PyObject *raw = PyBytes_FromStringAndSize(c->p, stop - c->p);
        if (!raw) return NULL;
        PyObject *v = PyObject_CallOneArg(loads, raw);
        Py_DECREF(raw);
        if (!v) { PyErr_Clear(); return NULL; }
        c->p = stop;
        return v;
    }
}

typedef struct {
    i64 index, time, process;
    int kind, nemesis, line;
    PyObject *f, *value, *key, *node, *error;
} Ev;

static void ev_clear(Ev *e) {
    Py_CLEAR(e->f); Py_CLEAR(e->value); Py_CLEAR(e->key); Py_CLEAR(e->node); Py_CLEAR(e->error);
}

/* one line into `e`: 1 decoded, 0 not the common shape (or bad), -1 error (exception set) */
static int parse_line(const char *p, const char *end, i64 ordinal, PyObject *loads, Ev *e) {
    Cur c = {p, end};
    memset(e, 0, sizeof *e);
    int have_time = 0, have_process = 0, have_type = 0, have_f = 0, have_index = 0;
    skip_ws(&c);
    if (c.p >= c.end || *c.p != '{') return 0;
    c.p++;
    skip_ws(&c);
    if (c.p < c.end && *c.p == '}') return 0;
    for (;;) {
        const char *k;
        Py_ssize_t kn;
        skip_ws(&c);
        if (!plain_str(&c, &k, &kn)) goto bad;
        skip_ws(&c);
        if (c.p >= c.end || *c.p != ':') goto bad;
        c.p++;
        skip_ws(&c);
#define KEY(name) (kn == (Py_ssize_t)sizeof(name) - 1 && memcmp(k, name, kn) == 0)
        if (KEY("index")) {
            if (!plain_int(&c, &e->index)) goto bad;
            have_index = 1;
        } else if (KEY("time")) {
            if (!plain_int(&c, &e->time)) goto bad;
            have_time = 1;
        } else if (KEY("process")) {
            const char *s;
            Py_ssize_t n;
            if (plain_int(&c, &e->process)) {
                e->nemesis = 0;
            } else if (plain_str(&c, &s, &n) && n == 7 && memcmp(s, "nemesis", 7) == 0) {
                e->nemesis = 1;
            } else {
                goto bad; /* other string processes (side processes): the Python path */
            }
            have_process = 1;
        } else if (KEY("type")) {
            const char *s;
            Py_ssize_t n;
            if (!plain_str(&c, &s, &n)) goto bad;
            if (n == 6 && memcmp(s, "invoke", 6) == 0) e->kind = T_INVOKE;
            else if (n == 2 && memcmp(s, "ok", 2) == 0) e->kind = T_OK;
            else if (n == 4 && memcmp(s, "fail", 4) == 0) e->kind = T_FAIL;
            else if (n == 4 && memcmp(s, "info", 4) == 0) e->kind = T_INFO;
            else goto bad;
            have_type = 1;
        } else if (KEY("f")) {
            const char *s;
            Py_ssize_t n;
            if (!plain_str(&c, &s, &n)) goto bad;
            Py_XDECREF(e->f);
            if (!(e->f = str_of(s, n))) goto err;
            have_f = 1;
        } else if (KEY("node")) {
            const char *s;
            Py_ssize_t n;
            Py_CLEAR(e->node);
            if (c.end - c.p >= 4 && memcmp(c.p, "null", 4) == 0) {
                c.p += 4;
            } else {
                if (!plain_str(&c, &s, &n)) goto bad;
                if (!(e->node = str_of(s, n))) goto err;
            }
        } else {
            PyObject **slot = KEY("value") ? &e->value : KEY("key") ? &e->key : KEY("error") ? &e->error : NULL;
            PyObject *v = json_value(&c, loads);
            if (!v) { if (PyErr_Occurred()) goto err; goto bad; }
            if (slot) { Py_XDECREF(*slot); *slot = v; } else Py_DECREF(v);
        }
#undef KEY
        skip_ws(&c);
        if (c.p < c.end && *c.p == ',') { c.p++; continue; }
        if (c.p < c.end && *c.p == '}') { c.p++; break; }
        goto bad;
    }
    skip_ws(&c);
    if (c.p != c.end || !have_time || !have_process || !have_type || !have_f) goto bad;
    if (e->key && (PyList_Check(e->key) || PyDict_Check(e->key))) goto bad; /* keys made hashable: Python */
    if (!have_index) e->index = ordinal;
    return 1;
bad:
    ev_clear(e);
    return 0;
err:
    ev_clear(e);
    return -1;
}

/* process -> (outstanding slot or -1, crashed) */
typedef struct { i64 key; i64 slot; int crashed, used; } PEnt;
typedef struct { PEnt *t; size_t cap, n; } PMap;

static PEnt *pmap_get(PMap *m, i64 key, int create) {
    if (create && (m->n + 1) * 2 > m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 256;
        PEnt *t = calloc(cap, sizeof(PEnt));
        if (!t) return NULL;
        for (size_t i = 0; i < m->cap; i++)
            if (m->t[i].used) {
                size_t h = mix((u64)m->t[i].key) & (cap - 1);
                while (t[h].used) h = (h + 1) & (cap - 1);
                t[h] = m->t[i];
            }
        free(m->t);
        m->t = t; m->cap = cap;
    }
    if (!m->cap) return NULL;
    size_t h = mix((u64)key) & (m->cap - 1);
    while (m->t[h].used) {
        if (m->t[h].key == key) return &m->t[h];
        h = (h + 1) & (m->cap - 1);
    }
    if (!create) return NULL;
    m->t[h].used = 1; m->t[h].key = key; m->t[h].slot = -1; m->t[h].crashed = 0;
    m->n++;
    return &m->t[h];
}

static Py_ssize_t OFFSETS[F_COUNT];

static PyObject *new_op(PyTypeObject *type, PyObject **fields) {
    PyObject *op = type->tp_alloc(type, 0);
    if (!op) return NULL;
    for (int i = 0; i < F_COUNT; i++) {
        PyObject *v = fields[i] ? fields[i] : Py_None;
        Py_INCREF(v);
        *(PyObject **)((char *)op + OFFSETS[i]) = v;
    }
    return op;
}

static int op_offsets(PyTypeObject *type) {
    for (int i = 0; i < F_COUNT; i++) {
        PyObject *d = PyDict_GetItemString(type->tp_dict, OP_FIELDS[i]);
        if (!d || !Py_IS_TYPE(d, &PyMemberDescr_Type)) return 0;
        PyMemberDef *m = ((PyMemberDescrObject *)d)->d_member;
        if (m->type != T_OBJECT_EX) return 0;
        OFFSETS[i] = m->offset;
    }
    return 1;
}

static PyObject *py_load(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer buf;
    PyObject *optype, *loads;
    if (!PyArg_ParseTuple(args, "y*OO", &buf, &optype, &loads)) return NULL;
    PyObject *result = NULL, *ops = NULL, *nemesis = NULL;
    Ev *pend = NULL; /* invokes, in invoke order */
    PyObject **done = NULL; /* the Op of each invoke once complete */
    size_t npend = 0, cap = 0;
    PMap procs = {0};
    Ev e;
    if (!PyType_Check(optype) || !op_offsets((PyTypeObject *)optype)) { PyBuffer_Release(&buf); Py_RETURN_NONE; }
    if (!TYPE_NAMES[0]) {
        static const char *names[4] = {"invoke", "ok", "fail", "info"};
        for (int j = 0; j < 4; j++)
            if (!(TYPE_NAMES[j] = PyUnicode_InternFromString(names[j]))) { PyBuffer_Release(&buf); return NULL; }
    }
    if (!(nemesis = PyList_New(0))) goto out;
    const char *p = buf.buf, *end = p + buf.len;
    i64 ordinal = 0;
    int line = 0;
    while (p < end) {
        const char *nl = memchr(p, '\n', end - p);
        const char *stop = nl ? nl : end;
        line++;
        const char *q = p;
        while (q < stop && (*q == ' ' || *q == '\t' || *q == '\r')) q++;
        if (q == stop) { p = nl ? nl + 1 : end; continue; }
        int rc = parse_line(p, stop, ordinal, loads, &e);
        if (rc < 0) goto out;
        if (rc == 0) goto fallback;
        e.line = line;
        ordinal++;
        p = nl ? nl + 1 : end;
        if (e.nemesis) {
            PyObject *row = Py_BuildValue("LLsOOOOOOi", (long long)e.index, (long long)e.time, "nemesis",
                                          TYPE_NAMES[e.kind], e.f, e.value ? e.value : Py_None,
                                          e.key ? e.key : Py_None, e.node ? e.node : Py_None,
                                          e.error ? e.error : Py_None, line);
            ev_clear(&e);
            if (!row || PyList_Append(nemesis, row) < 0) { Py_XDECREF(row); goto out; }
            Py_DECREF(row);
            continue;
        }
        PEnt *pe = pmap_get(&procs, e.process, 1);
        if (!pe) { ev_clear(&e); PyErr_NoMemory(); goto out; }
        if (pe->crashed) { ev_clear(&e); goto fallback; }
        if (e.kind == T_INVOKE) {
            if (pe->slot >= 0) { ev_clear(&e); goto fallback; }
            if (npend == cap) {
                size_t ncap = cap ? cap * 2 : 1024;
                Ev *np = realloc(pend, ncap * sizeof(Ev));
                if (!np) { ev_clear(&e); PyErr_NoMemory(); goto out; }
                pend = np;
                PyObject **nd = realloc(done, ncap * sizeof(PyObject *));
                if (!nd) { ev_clear(&e); PyErr_NoMemory(); goto out; }
                done = nd;
                cap = ncap;
            }
            pe->slot = (i64)npend;
            done[npend] = NULL;
            pend[npend++] = e; /* takes the references */
            continue;
        }
        if (pe->slot < 0) { ev_clear(&e); goto fallback; }
        Ev *inv = &pend[pe->slot];
        if (PyUnicode_Compare(inv->f, e.f) != 0) { ev_clear(&e); goto fallback; }
        PyObject *f[F_COUNT] = {0};
        PyObject *id = PyLong_FromLongLong(inv->index), *proc = PyLong_FromLongLong(e.process);
        PyObject *itime = PyLong_FromLongLong(inv->time), *cidx = PyLong_FromLongLong(e.index);
        PyObject *ctime = e.kind == T_INFO ? Py_NewRef(Py_None) : PyLong_FromLongLong(e.time);
        PyObject *gave_up = e.kind == T_INFO ? PyLong_FromLongLong(e.time) : Py_NewRef(Py_None);
        if (!id || !proc || !itime || !cidx || !ctime || !gave_up) {
            Py_XDECREF(id); Py_XDECREF(proc); Py_XDECREF(itime); Py_XDECREF(cidx); Py_XDECREF(ctime);
            Py_XDECREF(gave_up);
            ev_clear(&e);
            goto out;
        }
        f[F_ID] = id; f[F_PROCESS] = proc; f[F_F] = e.f;
        f[F_KEY] = inv->key && inv->key != Py_None ? inv->key : e.key;
        f[F_INVOKE_VALUE] = inv->value;
        f[F_VALUE] = e.kind == T_INFO ? inv->value : e.value;
        f[F_TYPE] = TYPE_NAMES[e.kind];
        f[F_INVOKE_TIME] = itime; f[F_COMPLETE_TIME] = ctime; f[F_INVOKE_INDEX] = id; f[F_COMPLETE_INDEX] = cidx;
        f[F_NODE] = e.node && e.node != Py_None ? e.node : inv->node;
        f[F_ERROR] = e.error;
        f[F_GAVE_UP_TIME] = gave_up;
        PyObject *op = new_op((PyTypeObject *)optype, f);
        Py_DECREF(id); Py_DECREF(proc); Py_DECREF(itime); Py_DECREF(cidx); Py_DECREF(ctime); Py_DECREF(gave_up);
        ev_clear(&e);
        if (!op) goto out;
        done[pe->slot] = op;
        ev_clear(inv);
        inv->f = NULL;
        if (e.kind == T_INFO) pe->crashed = 1;
        pe->slot = -1;
    }
    /* every invoke in order; those never completed become info ops open to the end */
    if (!(ops = PyList_New((Py_ssize_t)npend))) goto out;
    for (size_t i = 0; i < npend; i++) {
        PyObject *op = done[i];
        if (!op) {
            Ev *inv = &pend[i];
            PyObject *f[F_COUNT] = {0};
            PyObject *id = PyLong_FromLongLong(inv->index), *proc = PyLong_FromLongLong(inv->process);
            PyObject *itime = PyLong_FromLongLong(inv->time);
            if (!id || !proc || !itime) { Py_XDECREF(id); Py_XDECREF(proc); Py_XDECREF(itime); goto out; }
            f[F_ID] = id; f[F_PROCESS] = proc; f[F_F] = inv->f; f[F_KEY] = inv->key; f[F_INVOKE_VALUE] = inv->value;
            f[F_VALUE] = inv->value; f[F_TYPE] = TYPE_NAMES[T_INFO]; f[F_INVOKE_TIME] = itime;
            f[F_INVOKE_INDEX] = id; f[F_NODE] = inv->node; f[F_ERROR] = inv->error;
            op = new_op((PyTypeObject *)optype, f);
            Py_DECREF(id); Py_DECREF(proc); Py_DECREF(itime);
            if (!op) goto out;
        }
        done[i] = NULL;
        PyList_SET_ITEM(ops, (Py_ssize_t)i, op);
    }
    result = PyTuple_Pack(2, ops, nemesis);
    goto out;
fallback:
    result = Py_NewRef(Py_None);
out:
    for (size_t i = 0; i < npend; i++) { Py_XDECREF(done[i]); ev_clear(&pend[i]); }
    free(pend); free(done); free(procs.t);
    Py_XDECREF(ops); Py_XDECREF(nemesis);
    PyBuffer_Release(&buf);
    return result;
}

/* ---- a register key in the search's terms (RegisterModel.native, compiled) --------------------------
 * register_spec(ops, info, hashable) -> (kind, a, b, ikind, ia, ib, values, pure, blind, unique), or
 * None for anything unusual (an unknown f, a malformed cas): the Python version then says what. */

static PyObject *slot_of(PyObject *op, int field) { return *(PyObject **)((char *)op + OFFSETS[field]); }

static PyObject *plain(PyObject *v, PyObject *hashable) {
    if (v == Py_None || PyLong_CheckExact(v) || PyUnicode_CheckExact(v)) return Py_NewRef(v);
    return PyObject_CallOneArg(hashable, v);
}

/* the id of value v (interned in `ids`), or -1 with an exception */
static long intern_id(PyObject *ids, PyObject *v) {
    PyObject *got = PyDict_GetItemWithError(ids, v);
    if (got) return PyLong_AsLong(got);
    if (PyErr_Occurred()) return -1;
    Py_ssize_t n = PyDict_GET_SIZE(ids);
    PyObject *id = PyLong_FromSsize_t(n);
    if (!id || PyDict_SetItem(ids, v, id) < 0) { Py_XDECREF(id); return -1; }
    Py_DECREF(id);
    return (long)n;
}

/* kind, a, b of one op: 1, 0 unusual, -1 error */
static int op_parts(PyObject *op, PyObject *ids, PyObject *hashable, long *kind, long *a, long *b) {
    PyObject *f = slot_of(op, F_F), *first = NULL, *second = NULL;
    *b = 0;
    if (!PyUnicode_Check(f)) return 0;
    if (PyUnicode_CompareWithASCIIString(f, "read") == 0) {
        *kind = 0;
        first = plain(slot_of(op, F_VALUE), hashable);
    } else if (PyUnicode_CompareWithASCIIString(f, "write") == 0) {
        *kind = 1;
        first = plain(slot_of(op, F_INVOKE_VALUE), hashable);
    } else if (PyUnicode_CompareWithASCIIString(f, "cas") == 0) {
        PyObject *pair = slot_of(op, F_INVOKE_VALUE), *type = slot_of(op, F_TYPE);
        if (!(PyList_Check(pair) || PyTuple_Check(pair)) || PySequence_Size(pair) != 2) return 0;
        *kind = PyUnicode_Check(type) && PyUnicode_CompareWithASCIIString(type, "fail") == 0 ? 3 : 2;
        PyObject *x = PySequence_GetItem(pair, 0), *y = PySequence_GetItem(pair, 1);
        if (x && y) { first = plain(x, hashable); second = plain(y, hashable); }
        Py_XDECREF(x); Py_XDECREF(y);
        if (!first || !second) { Py_XDECREF(first); Py_XDECREF(second); return -1; }
    } else {
        return 0;
    }
    if (!first) return -1;
    *a = intern_id(ids, first); /* a before b, as the Python version interns them */
    Py_DECREF(first);
    if (*a >= 0 && second && second != Py_None) *b = intern_id(ids, second);
    Py_XDECREF(second);
    return *a < 0 || *b < 0 ? -1 : 1;
}

static PyObject *py_register_spec(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *ops, *info, *hashable;
    if (!PyArg_ParseTuple(args, "O!O!O", &PyList_Type, &ops, &PyList_Type, &info, &hashable)) return NULL;
    Py_ssize_t n = PyList_GET_SIZE(ops), ni = PyList_GET_SIZE(info);
    PyObject *sample = n ? PyList_GET_ITEM(ops, 0) : ni ? PyList_GET_ITEM(info, 0) : NULL;
    if (sample && !op_offsets(Py_TYPE(sample))) Py_RETURN_NONE;
    PyObject *ids = PyDict_New(), *zero = PyLong_FromLong(0), *result = NULL;
    PyObject *lists[8] = {0}; /* kind, a, b, ikind, ia, ib, pure, blind */
    long *written = malloc(sizeof(long) * (n + ni + 1));
    if (!ids || !zero || !written || PyDict_SetItem(ids, Py_None, zero) < 0) goto out;
    for (int i = 0; i < 8; i++) {
        Py_ssize_t len = i < 3 || i == 6 ? n : i < 6 ? ni : n + ni;
        if (!(lists[i] = PyList_New(len))) goto out;
    }
    Py_ssize_t nw = 0;
    for (Py_ssize_t i = 0; i < n + ni; i++) {
        int det = i < n;
        PyObject *op = det ? PyList_GET_ITEM(ops, i) : PyList_GET_ITEM(info, i - n);
        if (Py_TYPE(op) != Py_TYPE(sample)) { result = Py_NewRef(Py_None); goto out; }
        long kind, a, b;
        int rc = op_parts(op, ids, hashable, &kind, &a, &b);
        if (rc < 0) goto out;
        if (rc == 0) { result = Py_NewRef(Py_None); goto out; }
        if (kind == 1) written[nw++] = a;
        else if (kind == 2) written[nw++] = b;
        Py_ssize_t j = det ? i : i - n;
        int base = det ? 0 : 3;
        PyList_SET_ITEM(lists[base], j, PyLong_FromLong(kind));
        PyList_SET_ITEM(lists[base + 1], j, PyLong_FromLong(a));
        PyList_SET_ITEM(lists[base + 2], j, PyLong_FromLong(b));
        if (det) PyList_SET_ITEM(lists[6], j, Py_NewRef(kind == 0 || kind == 3 || (kind == 2 && a == b) ? Py_True : Py_False));
        PyList_SET_ITEM(lists[7], i, Py_NewRef(kind == 1 ? Py_True : Py_False));
    }
    Py_ssize_t nv = PyDict_GET_SIZE(ids);
    char *seen = calloc(nv + 1, 1);
    if (!seen) { PyErr_NoMemory(); goto out; }
    int unique = 1;
    for (Py_ssize_t k = 0; k < nw && unique; k++) {
        if (written[k] == 0 || seen[written[k]]) unique = 0;
        seen[written[k]] = 1;
    }
    free(seen);
    result = Py_BuildValue("OOOOOOnOOO", lists[0], lists[1], lists[2], lists[3], lists[4], lists[5], nv, lists[6],
                           lists[7], unique ? Py_True : Py_False);
out:
    for (int i = 0; i < 8; i++) Py_XDECREF(lists[i]);
    Py_XDECREF(ids); Py_XDECREF(zero);
    free(written);
    return result;
}

/* ---- a register key's ops split for the search (linearizable._prepare, compiled) ------------------
 * register_split(ops) -> (det, inv, ret, info, iinv): the ops RegisterModel.keep keeps, determinate
 * and indeterminate apart, with their times; None if they are not already in invoke-time order (or
 * anything is unusual): the Python version then sorts. */
static int str_is(PyObject *u, const char *s) { return PyUnicode_Check(u) && PyUnicode_CompareWithASCIIString(u, s) == 0; }

static PyObject *py_register_split(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *ops, *compare_failed = NULL; /* compare_failed(op): whether a failed cas observed anything */
    if (!PyArg_ParseTuple(args, "O!|O", &PyList_Type, &ops, &compare_failed)) return NULL;
    Py_ssize_t n = PyList_GET_SIZE(ops);
    PyObject *out[5] = {0}, *result = NULL;
    for (int i = 0; i < 5; i++)
        if (!(out[i] = PyList_New(0))) goto out;
    if (n && !op_offsets(Py_TYPE(PyList_GET_ITEM(ops, 0)))) { result = Py_NewRef(Py_None); goto out; }
    PyObject *last_det = NULL, *last_info = NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *op = PyList_GET_ITEM(ops, i);
        if (Py_TYPE(op) != Py_TYPE(PyList_GET_ITEM(ops, 0))) { result = Py_NewRef(Py_None); goto out; }
        PyObject *f = slot_of(op, F_F), *type = slot_of(op, F_TYPE);
        int keep = str_is(f, "cas") || (str_is(f, "read") ? str_is(type, "ok") : !str_is(type, "fail"));
        if (keep && compare_failed && slot_of(op, F_ERROR) != Py_None && str_is(f, "cas") && str_is(type, "fail")) {
            PyObject *said = PyObject_CallOneArg(compare_failed, op); /* a cas refused before sending: drop it */
            if (!said) goto out;
            keep = PyObject_IsTrue(said);
            Py_DECREF(said);
            if (keep < 0) goto out;
        }
        if (!keep) continue;
        PyObject *inv = slot_of(op, F_INVOKE_TIME), *ret = slot_of(op, F_COMPLETE_TIME);
        int det = ret != Py_None;
        PyObject **last = det ? &last_det : &last_info;
        if (*last) {
            int before = PyObject_RichCompareBool(inv, *last, Py_LT);
            if (before < 0) goto out;
            if (before) { result = Py_NewRef(Py_None); goto out; } /* not in invoke order: Python sorts */
        }
        *last = inv;
        if (PyList_Append(out[det ? 0 : 3], op) < 0 || PyList_Append(out[det ? 1 : 4], inv) < 0) goto out;
        if (det && PyList_Append(out[2], ret) < 0) goto out;
    }
    result = PyTuple_Pack(5, out[0], out[1], out[2], out[3], out[4]);
out:
    for (int i = 0; i < 5; i++) Py_XDECREF(out[i]);
    return result;
}

/* ---- ops grouped by key (Model.partition's default, compiled) ---------------------------------------
 * group_by_key(ops) -> {key: [op, ...]} in first-seen order, or None if the ops are not all Op objects
 * with the loader's slots (the Python version then groups them). */
static PyObject *py_group_by_key(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *ops;
    if (!PyArg_ParseTuple(args, "O!", &PyList_Type, &ops)) return NULL;
    Py_ssize_t n = PyList_GET_SIZE(ops);
    if (n && !op_offsets(Py_TYPE(PyList_GET_ITEM(ops, 0)))) Py_RETURN_NONE;
    PyObject *parts = PyDict_New();
    if (!parts) return NULL;
    PyTypeObject *type = n ? Py_TYPE(PyList_GET_ITEM(ops, 0)) : NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *op = PyList_GET_ITEM(ops, i);
        if (Py_TYPE(op) != type) { Py_DECREF(parts); Py_RETURN_NONE; }
        PyObject *key = slot_of(op, F_KEY);
        if (!key) { Py_DECREF(parts); Py_RETURN_NONE; } /* an unset slot: let Python say so */
        PyObject *list = PyDict_GetItemWithError(parts, key);
        if (!list) {
            if (PyErr_Occurred() || !(list = PyList_New(0))) { Py_DECREF(parts); return NULL; }
            int rc = PyDict_SetItem(parts, key, list);
            Py_DECREF(list); /* the dict holds it */
            if (rc < 0) { Py_DECREF(parts); return NULL; }
        }
        if (PyList_Append(list, op) < 0) { Py_DECREF(parts); return NULL; }
    }
    return parts;
}

static PyMethodDef methods[] = {
    {"group_by_key", py_group_by_key, METH_VARARGS, "Model.partition's default, compiled; see checkers/models.py."},
    {"register_split", py_register_split, METH_VARARGS, "linearizable._prepare for the register, compiled."},
    {"register_spec", py_register_spec, METH_VARARGS, "RegisterModel.native, compiled; see checkers/models.py."},
    {"load", py_load, METH_VARARGS, "The history loader's fast path; see checkers/history.py `load_history`."},
    {"search", py_search, METH_VARARGS, "The register search; see checkers/linearizable.py `_native_search`."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_lincore", "Compiled linearizability search.", -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__lincore(void) {
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    /* search() takes the symmetry flag (issue 29): an older build does not, and says so by lacking this */
    if (PyModule_AddIntConstant(m, "SYMMETRY", 1) < 0) { Py_DECREF(m); return NULL; }
    /* register_split(ops, compare_failed) drops a cas refused before sending itself (an older build
       takes the ops alone, and Python drops them first) */
    if (PyModule_AddIntConstant(m, "SPLIT_TAKES_COMPARE_FAILED", 1) < 0) { Py_DECREF(m); return NULL; }
    PyObject *names = PyTuple_New(F_COUNT);
    if (!names) { Py_DECREF(m); return NULL; }
    for (int i = 0; i < F_COUNT; i++) {
        PyObject *name = PyUnicode_FromString(OP_FIELDS[i]);
        if (!name) { Py_DECREF(names); Py_DECREF(m); return NULL; }
        PyTuple_SET_ITEM(names, i, name);
    }
    if (PyModule_AddObject(m, "OP_FIELDS", names) < 0) { Py_DECREF(names); Py_DECREF(m); return NULL; }
    return m;
}
