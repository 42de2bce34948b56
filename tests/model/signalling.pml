/* The signalling protocol of tpcomm's custom and multimem kernels, as a SPIN model.
 *
 * What one process stands for: Block(r, b) is thread block b of rank r's kernels, launch after
 * launch on r's stream; Host(r) is rank r's host side (eager checks, graph replays, abort and
 * its write of the group's failure word); init starts them, waits for every launch to end and
 * checks that every failure was seen. The model follows the code at commit f4f442a (the group's
 * failure word); every step cites the lines it stands for.  The model is
 * preprocessed by cpp: every configuration is a set of -D macros (tests/model/check.sh runs them).
 *
 * Weak memory (the GPU's, which plain SPIN interleavings do not have):
 *  - a plain store (the data copies, multimem.st, the reduced slices) goes to a pending value of
 *    its slot and becomes visible to other ranks at a nondeterministic later moment: a reader
 *    that finds a pending value may see it or the old one (then the slot takes it, coherence);
 *  - a release store (st.release.sys, multimem.red.release) first makes the writing block's
 *    pending stores visible, then stores the flag;
 *  - an acquire load (ld.acquire.sys, then bar.sync) is the earliest point the block's data loads
 *    may be performed; with a weakened acquire (BROKEN_WEAK_ACQUIRE) they may be performed at any
 *    moment of the wait, before the flag is seen;
 *  - the end of a kernel makes all of the rank's stores visible (the next launch on the stream,
 *    and its release stores, come after it).
 *
 * Properties (each a named assertion, so a failure says which one broke):
 *   stale_read         a launch that loaded anything but this call's data (an older call's, a
 *                      later call's overwrite, a store not visible yet) ends without reporting a
 *                      failure: a silent wrong result (checked at the launch's end, kernel_end);
 *   invisible_failure  some kernel gave up or some rank aborted, and at the end a rank has neither
 *                      reported an error nor holds a state that its next call or launch turns into
 *                      one (checked by init once every launch ended);
 *   deadlock           SPIN's "invalid end state": init never sees every launch end.
 *
 * Configuration macros (defaults below): W ranks, NB blocks per rank, calls 1..3 with operation
 * OPn, grid size NBn (1 or NB) and graph flag GRn (1: a graph replay, no host code);
 * FAULT 0: no fault, waits never give up; FAULT 1: rank STALLER stalls past the wait budget
 *   (during call STALL_CALL, 0: any), so waits missing it may give up, and any wait may once
 *   something failed; FAULT 2: rank ABORTER's caller aborts at any moment (before the host's call
 *   ABORT_CALL, 0: any), waits give up only on the abort word unless TIMEOUTS=1;
 * GROUP_WORD (default 1): the group's failure word of commit f4f442a (kernel_codes.hpp); 0: the
 *   kernels the review read (97e1ca9), whose failures stayed on the rank that saw them;
 * TRAP (default 1): a launch replayed from a CUDA graph that fails traps (f4f442a); 0: it returns;
 * TELL_ON_ABORT (default 0): a kernel that gives up on the abort word (code 2) stores the group's
 *   word too, as it does on a timeout (not in the code: the change this model asks for);
 * PUBLISH_FIRST (default 1): abort() writes the group's word everywhere before it sets the abort
 *   word or the communicator refuses a call (commit ff9c36e, the change this model asked for:
 *   custom_backend.cpp and multimem_backend.cpp abort(), communicator.cpp abort_with); 0: the
 *   order of f4f442a (the abort word first, then the host's write of the group's word);
 * END_CHECK (default 0): a check of the word at the end of each launch (not in the code);
 * DRAIN, STOP: state-space cuts after a failure, GROUP_WORD only (explained where defined);
 * CHECK_VISIBLE=0 leaves invisible_failure out (to show what else the current code does);
 * BROKEN_*: one deliberately broken variant at a time (tests/model/check.sh lists them). */

#ifndef W
#define W 2
#endif
#ifndef NB
#define NB 2
#endif
#define C 3
#ifndef OP1
#define OP1 ONE
#endif
#ifndef OP2
#define OP2 TWO
#endif
#ifndef OP3
#define OP3 ONE_IP
#endif
#ifndef NB1
#define NB1 NB
#endif
#ifndef NB2
#define NB2 1
#endif
#ifndef NB3
#define NB3 NB
#endif
#ifndef GR1
#define GR1 0
#endif
#ifndef GR2
#define GR2 0
#endif
#ifndef GR3
#define GR3 1
#endif
#ifndef FAULT
#define FAULT 0
#endif
#ifndef TIMEOUTS
#if FAULT == 1
#define TIMEOUTS 1
#else
#define TIMEOUTS 0
#endif
#endif
#ifndef STALLER
#define STALLER (W - 1)
#endif
#ifndef STALL_CALL
#define STALL_CALL 0
#endif
#ifndef ABORT_CALL
#define ABORT_CALL 0
#endif
#ifndef ABORTER
#define ABORTER (W - 1)
#endif
#ifndef GROUP_WORD
#define GROUP_WORD 1
#endif
#ifndef TRAP
#define TRAP GROUP_WORD
#endif
#ifndef TELL_ON_ABORT
#define TELL_ON_ABORT 0
#endif
#ifndef PUBLISH_FIRST
#define PUBLISH_FIRST 1
#endif
#ifndef END_CHECK
#define END_CHECK 0
#endif
#ifndef CHECK_VISIBLE
#define CHECK_VISIBLE 1
#endif

/* Operations, one launch each (a call of count 0 still launches one chunk,
   cuda_layout.hpp:121-123). */
#define ONE 1     /* one-shot through the data buffers (all-gather, reduce-scatter: same shape) */
#define ONE_IP 2  /* one-shot reading registered graph buffers in place (custom_kernels.cu:99) */
#define TWO 3     /* two-shot through the data buffers */
#define TWO_IP 4  /* two-shot reading registered graph buffers in place */
#define MMR 5     /* multimem reduce in the switch (multimem_kernels.cu:209-225) */
#define MMG 6     /* multimem gather then local reduce (multimem_kernels.cu:252-284) */

#define OPC(c) (c == 1 -> OP1 : (c == 2 -> OP2 : OP3))
#define NBC(c) (c == 1 -> NB1 : (c == 2 -> NB2 : NB3))
#define GRC(c) (c == 1 -> GR1 : (c == 2 -> GR2 : GR3))
#define MULTIMEM(op) (op == MMR || op == MMG)

/* Data tags: call c's input is c, its reduced slice c + 8 (any other value is stale). */
#define RED 8

/* ---- Shared state --------------------------------------------------------------------------- */
/* custom pads: pad[phase][block][to][from], the step number `from` last stored into `to`'s pad
   (cuda_layout.hpp:58-62: pad_index(phase, block, from_rank) in the workspace of `to`). */
#define PAD(ph, bl, to, fr) ((((ph) * NB + (bl)) * W + (to)) * W + (fr))
byte pad[3 * NB * W * W];
/* multimem counters: cnt[copy][phase][block] (multimem_layout.hpp:8-10), tgt[rank][phase][block]
   the rank's local barrier target (multimem_kernels.cu:148-151). */
#define CNT(cp, ph, bl) (((cp) * 3 + (ph)) * NB + (bl))
byte cnt[W * 3 * NB];
byte tgt[W * 3 * NB];

/* Data slots. cd: owner's data buffer by parity and half (the block ranges of a 2-block grid);
   cr: the owner's own two-shot slice of it (input, then the reduced slice); ub: the owner's
   registered graph buffer; mr[copy][share]: a multimem area slot of `share` in `copy`. Each has a
   pending value (0: none) for the weak stores. */
#define CD(o, p, hf) (((o) * 2 + (p)) * NB + (hf))
#define UB(o, hf) ((o) * NB + (hf))
#define MR(cp, sh, p, hf) ((((cp) * W + (sh)) * 2 + (p)) * NB + (hf))
byte cd[W * 2 * NB]; byte cd_p[W * 2 * NB];
byte cr[W * 2 * NB]; byte cr_p[W * 2 * NB];
byte ub[W * NB];
byte mr[W * W * 2 * NB]; byte mr_p[W * W * 2 * NB];

/* Streams: launched[r] kernels enqueued, kc[r][k] the call of r's k-th kernel, kdone[r] kernels
   finished, fin[r] finished blocks of the running one, step[r] = steps[0]
   (kernel_common.cuh:309-337). */
byte launched[W]; byte kc[W * C]; byte kdone[W]; byte fin[W]; byte step[W];
bool hostdone[W];

/* Failure state. aborted: the host-local abort word (kernel_watchdog.cpp:68-70); rec: the
   host-mapped failure record (kernel_common.cuh:244-255); error_seen: the host raised or reported
   an error; fw: the group's failure word in each rank's workspace (custom_kernels.cu:24-27,
   cuda_layout.hpp:51), written by any rank; told: an abort's host write of it has been made;
   trapped: the rank's CUDA context died of a trap, so nothing more runs on it and its next
   synchronisation fails. */
bool aborted[W]; bool rec[W]; bool error_seen[W]; bool fw[W]; bool told[W]; bool trapped[W];
bool any_failure;
bool stale_read; bool invisible_failure;
/* Loop counters of the atomic steps: never live across steps, so kept out of the state. */
hidden byte xq; hidden byte xh; hidden byte xp;

/* ---- Weak stores ---------------------------------------------------------------------------- */
/* A plain store: an older pending value of the slot may or may not have become visible first. */
#define WSTORE(arr, pend, i, v) \
  if :: pend[i] != 0 -> if :: arr[i] = pend[i] :: skip fi :: else -> skip fi; \
  pend[i] = v
/* A load of a slot another rank writes: a pending store may have become visible (it then stays),
   or not; what is read must be this call's data. */
#define WLOAD(arr, pend, i, want) \
  if :: pend[i] != 0 -> if :: arr[i] = pend[i]; pend[i] = 0 :: skip fi :: else -> skip fi; \
  if :: arr[i] != want -> tainted = true :: else -> skip fi
#define FLUSH(arr, pend, i) if :: pend[i] != 0 -> arr[i] = pend[i]; pend[i] = 0 :: else -> skip fi
/* The pending stores of rank `w`'s block that covers halves lo..hi become visible: what a release
   by that block (after its bar.sync) orders before its flag. */
inline flush_writer(w, lo, hi) {
  xp = 0;
  do
  :: xp < 2 ->
     xh = lo;
     do
     :: xh <= hi ->
        FLUSH(cd, cd_p, CD(w, xp, xh)); FLUSH(cr, cr_p, CD(w, xp, xh));
        xq = 0;
        do :: xq < W -> FLUSH(mr, mr_p, MR(xq, w, xp, xh)); xq++ :: else -> break od;
        xh++
     :: else -> break
     od;
     xp++
  :: else -> break
  od
}

/* ---- One block's kernels -------------------------------------------------------------------- */
/* Halves of block b in a grid of nb blocks (split_vectors, cuda_layout.hpp:89-95): its own half,
   or both when it is the only block. */
#define LO (nb == 1 -> 0 : b)
#define HI (nb == 1 -> NB - 1 : b)
#define START 8  /* waiting for launch k */
#define SIT 10    /* launch k runs without this block */
#define WAITING (ph < 3 && !trapped[r])

/* Giving up (bounded_wait, kernel_common.cuh:258-284; record_failure :244-255): the first
   failure goes into the host-mapped record; the host watchdog turns it into abort_with
   (kernel_watchdog.cpp:53-64, communicator.cpp:243-268), which sets this rank's abort word (and,
   with GROUP_WORD, has the host write the group's word: host_tell): taken as immediate here, as
   it only makes this rank's own later waits give up sooner. With GROUP_WORD a timeout (code 1)
   first stores the word into every rank's workspace (tell_the_group, custom_kernels.cu:33-37,
   57; multimem_kernels.cu:130-134, 159). Then a graph replay traps (end_failed_launch,
   kernel_common.cuh:305-306; custom_kernels.cu:62, multimem_kernels.cu:164) and an eager launch
   returns without its output (custom_kernels.cu:107, 121, 129, 141, 158; multimem_kernels.cu:215,
   221, 240, 267). */
inline give_up(code) {
  any_failure = true; rec[r] = true; aborted[r] = true; reported = true;
#if GROUP_WORD
  if
  :: code == 1 || (TELL_ON_ABORT && code == 2) ->
     xq = 0; do :: xq < W -> fw[xq] = true; xq++ :: else -> break od
  :: else -> skip
  fi;
#endif
  end_failed_launch()
}
#if TRAP
inline end_failed_launch() {
  if :: GRC(c) -> trapped[r] = true :: else -> kernel_end() fi
}
#else
inline end_failed_launch() { kernel_end() }
#endif

/* ~LaunchStep (kernel_common.cuh:323-329): the last block to finish publishes the launch's
   number; the kernel's end makes all of the rank's stores visible; the next launch may start.
   BROKEN_STEP_NOT_ADVANCED: launch 2 does not publish its number, so launch 3 reuses it. */
inline kernel_end() {
#if GROUP_WORD && END_CHECK
  /* END_CHECK: the word, read again after the last loads: a launch that may have read a buffer a
     failed peer's stream overwrote reports (not in the code; the trap makes it unneeded). */
  if :: fw[r] -> rec[r] = true; reported = true :: else -> skip fi;
#endif
  /* The property: a launch that loaded anything but this call's data reported a failure. */
  stale_read = tainted && !reported;
  assert(!stale_read);
  tainted = false; reported = false; early = false;  /* nothing of a launch outlives it */
  fin[r]++;
  if
  :: fin[r] == nb ->
     fin[r] = 0;
#if BROKEN_STEP_NOT_ADVANCED
     if :: k != 2 -> step[r] = s :: else -> skip fi;
#else
     step[r] = s;
#endif
     flush_writer(r, 0, NB - 1);
     kdone[r]++
  :: else -> skip
  fi;
  k++; ph = START
}

/* Custom barrier, signal half (custom_kernels.cu:43-52): __syncthreads, then thread p < W
   stores the step into pad[phase][block][me] of rank p (__threadfence_system + st.release.sys,
   :51-52); the W signalling threads are one step here (each reader looks only at its own flag).
   Multimem barrier, signal half (multimem_kernels.cu:139-152): fences, thread 0 raises its local
   target by W (:148-151) and adds 1 to the pad in every rank's copy (multimem.red.release, :152).
   Both release: the block's pending stores become visible first, except with
   BROKEN_WEAK_RELEASE (a plain signal store). */
inline signal(phase) {
  ph = phase; early = false;
#if !BROKEN_WEAK_RELEASE
  flush_writer(r, LO, HI);
#endif
  if
  :: MULTIMEM(op) ->
     tgt[CNT(r, ph, b)] = tgt[CNT(r, ph, b)] + W;
#if !BROKEN_SKIP_COUNT
     xq = 0; do :: xq < W -> cnt[CNT(xq, ph, b)]++; xq++ :: else -> break od
#else
     skip
#endif
  :: else ->
     xq = 0; do :: xq < W -> pad[PAD(ph, b, xq, r)] = s; xq++ :: else -> break od
  fi
}
/* Wait half: the custom barrier's thread p spins on rank p's flag in its own pad
   (custom_kernels.cu:53-59); the multimem barrier's thread 0 on its own copy of the counter
   reaching the target (multimem_kernels.cu:153-161). */
#define REACHED_FROM(f) (pad[PAD(ph, b, r, f)] >= s)
#define CUSTOM_REACHED (REACHED_FROM(0) && REACHED_FROM(1) && \
                        (W < 3 || REACHED_FROM(2)) && (W < 4 || REACHED_FROM(3)))
#define REACHED (MULTIMEM(op) -> cnt[CNT(r, ph, b)] >= tgt[CNT(r, ph, b)] : CUSTOM_REACHED)
/* The stalled rank has not signalled this barrier yet. */
#define STALLER_MISSING (MULTIMEM(op) -> tgt[CNT(STALLER, ph, b)] < tgt[CNT(r, ph, b)] \
                                       : !REACHED_FROM(STALLER))

/* How a wait ends besides the flag (bounded_wait, kernel_common.cuh:258-284): the abort word
   (code 2, :272); the time budget (code 1, :277; FAULT 1: only while the stalled rank is
   missing, or once anything failed); GROUP_WORD: the group's word (code 3, :270-276).
   BROKEN_WEAK_ACQUIRE: the
   loads after the barrier may be performed while spinning, before the flag is seen. */
#if TIMEOUTS
#define MAY_TIME_OUT (any_failure || ((STALL_CALL == 0 || c == STALL_CALL) && STALLER_MISSING))
#else
#define MAY_TIME_OUT false
#endif
#if GROUP_WORD
#define FW_SET fw[r]
#else
#define FW_SET false
#endif
/* DRAIN (GROUP_WORD only, a state-space cut, check.sh MODEL_EXTRA=1): once a rank's copy of the
   group's word is set, its blocks no longer pass barriers but give up, and its host makes its
   remaining calls at once.
   What is cut (passing, then loading) ends in the same report at the launch's end, and every
   rank's word is set in the same step as the first failure, so the properties are unchanged. */
#if GROUP_WORD && DRAIN
#define DRAINING fw[r]
#else
#define DRAINING false
#endif
/* STOP (GROUP_WORD only, the cut used for W = 4 with a fault): the search ends at the first
   failure (with the group's word set on every rank, or a trap); what follows is explored to the end at
   W = 2 and 3. */
#if GROUP_WORD && STOP
#define LIVE (!any_failure)
#define LIVE_AT_END (!any_failure)
#else
#define LIVE true
#define LIVE_AT_END true
#endif
#if BROKEN_WEAK_ACQUIRE
#define EARLY_OK (!early)
#else
#define EARLY_OK false
#endif

/* The loads that follow barrier `ph` of the running operation, all peers, the block's halves.
   A rank's own stores are visible to itself in program order, so custom loads skip their own
   rank; a multimem load goes through the switch and reads every copy. */
inline loads_after() {
  xh = LO;
  do
  :: xh <= HI ->
     xq = 0;
     do
     :: xq < W ->
        if
        /* one-shot: every rank's buffer, after the start barrier (custom_kernels.cu:108-110) */
        :: op == ONE && ph == 0 && xq != r ->
           WLOAD(cd, cd_p, CD(xq, s % 2, xh), c); WLOAD(cr, cr_p, CD(xq, s % 2, xh), c)
        /* in place: every rank's registered input (custom_kernels.cu:74-81, 108-110, 126-127) */
        :: (op == ONE_IP || op == TWO_IP) && ph == 0 && xq != r ->
           if :: ub[UB(xq, xh)] != c -> tainted = true :: else -> skip fi
        /* two-shot reduce: my slice of every rank's buffer (custom_kernels.cu:125-128) */
        :: op == TWO && ph == 0 && xq != r -> WLOAD(cd, cd_p, CD(xq, s % 2, xh), c)
        /* two-shot gather: every rank's reduced slice (custom_kernels.cu:130-134) */
        :: (op == TWO || op == TWO_IP) && ph == 1 && xq != r ->
           WLOAD(cr, cr_p, CD(xq, s % 2, xh), c + RED)
        /* multimem ld_reduce of my share from every copy (multimem_kernels.cu:216-219) */
        :: op == MMR && ph == 0 -> WLOAD(cd, cd_p, CD(xq, s % 2, xh), c)
        /* multimem: my copy's result half (:222-224) or the gather slots (:272-283) */
        :: op == MMR && ph == 1 -> WLOAD(mr, mr_p, MR(r, xq, s % 2, xh), c + RED)
        :: op == MMG && ph == 0 -> WLOAD(mr, mr_p, MR(r, xq, s % 2, xh), c)
        :: else -> skip
        fi;
        xq++
     :: else -> break
     od;
     xh++
  :: else -> break
  od
}

/* The stores before the first barrier: the copy into my data buffer of this parity
   (custom_kernels.cu:103-106, 117-120, 138-140, 153-157; multimem :212-214) or the multicast
   store of my input into my slot of every copy (multimem :260-266). */
inline copy_in() {
  xh = LO;
  do
  :: xh <= HI ->
     if
     :: op == ONE || op == TWO || op == MMR ->
        WSTORE(cd, cd_p, CD(r, s % 2, xh), c); WSTORE(cr, cr_p, CD(r, s % 2, xh), c)
     :: op == MMG ->
        xq = 0; do :: xq < W -> WSTORE(mr, mr_p, MR(xq, r, s % 2, xh), c); xq++ :: else -> break od
     :: else -> skip
     fi;
     xh++
  :: else -> break
  od
}
/* The stores between the barriers: two-shot's reduced slice into my own buffer
   (custom_kernels.cu:126-128), multimem's sums into every copy's result half (multimem :217-220). */
inline store_reduced() {
  xh = LO;
  do
  :: xh <= HI ->
     if
     :: op == TWO || op == TWO_IP -> WSTORE(cr, cr_p, CD(r, s % 2, xh), c + RED)
     :: op == MMR ->
        xq = 0; do :: xq < W -> WSTORE(mr, mr_p, MR(xq, r, s % 2, xh), c + RED); xq++ :: else -> break od
     :: else -> skip
     fi;
     xh++
  :: else -> break
  od
}

/* After the loads of barrier `ph`: the next barrier's signal, or the kernel's end. */
inline advance() {
  if
  :: ph == 0 && op == ONE_IP ->
     /* the end barrier of one-shot in place: inputs read in place stay until every peer has read
        them (custom_kernels.cu:111-112) */
#if !BROKEN_SKIP_END
     signal(2)
#else
     kernel_end()
#endif
  :: ph == 0 && (op == TWO || op == TWO_IP || op == MMR) ->
     store_reduced();
     /* the middle barrier (custom_kernels.cu:129; multimem_kernels.cu:221) */
#if !BROKEN_SKIP_MIDDLE
     signal(1)
#else
     ph = 1; loads_after(); kernel_end()
#endif
  :: else -> kernel_end()
  fi
}

/* Every step of a block is one atomic action at the head of this loop: a launch starting (its
   copy and first signal), a barrier passed (the loads after it, then the next signal or the end),
   or a wait giving up. The head is an end state: a block waiting for a launch that never comes
   is fine; init checks that every launch ended, so a block stuck in a barrier is a deadlock. */
proctype Block(byte r; byte b) {
  byte k = 1; byte c; byte op; byte nb; byte s; byte ph = START;
  bool early; bool tainted; bool reported;
end_block:
  do
  :: /* Launch k starts once the host enqueued it and launch k - 1 finished (stream order). */
     atomic {
       LIVE && !trapped[r] && ph == START && launched[r] >= k && kdone[r] >= k - 1 ->
       c = kc[r * C + k - 1]; op = OPC(c); nb = NBC(c);
       /* LaunchStep (kernel_common.cuh:317-322): this launch's number, the last one's plus 1. */
       s = step[r] + 1; tainted = false; reported = false;
       if
       :: b >= nb -> ph = SIT  /* not in this grid (blocks_for, cuda_layout.hpp:100-107) */
       :: else ->
          if
          :: op == ONE_IP || op == TWO_IP ->
             /* the registered graph buffer, written by the kernels before this one */
             xh = LO; do :: xh <= HI -> ub[UB(r, xh)] = c; xh++ :: else -> break od
          :: else -> skip
          fi;
#if GROUP_WORD
          /* The word, read on entry (group_failed_on_entry, kernel_common.cuh:288-299;
             custom_kernels.cu:93-94, multimem_kernels.cu:290-291): record code 3 and stop before
             copying in or signalling (a graph replay traps). */
          if
          :: fw[r] -> rec[r] = true; reported = true; end_failed_launch()
          :: else -> copy_in(); signal(0)
          fi
#else
          copy_in(); signal(0)  /* custom_kernels.cu:103-107 ...; multimem_kernels.cu:212-215 ... */
#endif
       fi
     }
  :: atomic { LIVE && !trapped[r] && ph == SIT && kdone[r] >= k -> k++; ph = START }
  :: atomic { LIVE && WAITING && REACHED && !DRAINING -> if :: !early -> loads_after() :: else -> skip fi; advance() }
  :: atomic { LIVE && WAITING && !REACHED && aborted[r] && !FW_SET -> give_up(2) }
  :: atomic { LIVE && WAITING && !REACHED && MAY_TIME_OUT && !aborted[r] && !FW_SET -> give_up(1) }
  :: atomic { LIVE && WAITING && FW_SET && (!REACHED || DRAINING) -> give_up(3) }
  :: atomic { LIVE && WAITING && EARLY_OK && !DRAINING -> loads_after(); early = true }
  od
}

/* ---- Hosts ---------------------------------------------------------------------------------- */
/* Rank r's host thread. An eager call first takes a recorded kernel failure and refuses when the
   communicator is aborted (communicator.cpp:271-275); a graph replay launches with no host code
   at all. FAULT 2: rank ABORTER's caller may abort at any moment (communicator.cpp:243-268: the
   backends' abort(), custom_backend.cpp:113-136 and multimem_backend.cpp:97-117, write the
   group's word and wait for it, then set the host-local abort word, kernel_watchdog.cpp:68-70;
   only then does the communicator refuse calls). At the end the host waits for its stream
   and reads the failure record (take_async_failure at its next call, or after the stream). */
inline host_abort() {
#if GROUP_WORD && PUBLISH_FIRST
  /* PUBLISH_FIRST: the group's word is written into every workspace (and the copies waited
     for) before the abort word is set and before the communicator refuses a call. */
  told[r] = true; xq = 0; do :: xq < W -> fw[xq] = true; xq++ :: else -> break od;
#endif
  aborted[r] = true; any_failure = true; error_seen[r] = true
}
/* An enqueued call and the graph replays right after it (a graph replay runs no host code). */
inline enqueue() {
  launched[r]++; kc[r * C + launched[r] - 1] = c; c++;
  do :: c <= C && GRC(c) -> launched[r]++; kc[r * C + launched[r] - 1] = c; c++ :: else -> break od;
  if :: c > C -> hostdone[r] = true :: else -> skip fi
}
proctype Host(byte r) {
  byte c = 1;
#if FAULT == 0
  atomic {
    do :: c <= C -> launched[r]++; kc[r * C + launched[r] - 1] = c; c++ :: else -> break od;
    hostdone[r] = true
  }
#else
  /* The first call finds nothing recorded (no launch ran yet): it is enqueued at the start,
     unless this host may abort before it. */
  atomic { if :: !(FAULT == 2 && r == ABORTER) -> enqueue() :: else -> skip fi }
  /* The host's step for an eager call is taken once its stream is idle: an enqueue while an
     earlier launch still runs behaves the same, and its check may come before that launch's
     failure is recorded, hence "launch" stays possible after a failure. */
end_host:
  do
  :: atomic {
       LIVE && c <= C && kdone[r] == launched[r] ->
       if
       :: !GRC(c) && (aborted[r] || rec[r]) ->
          error_seen[r] = true; c++;
          if :: c > C -> hostdone[r] = true :: else -> skip fi
       :: !DRAINING -> enqueue()
       :: DRAINING -> skip
       fi;
       do
       :: DRAINING && c <= C && !GRC(c) && (aborted[r] || rec[r]) -> error_seen[r] = true; c++
       :: DRAINING && c <= C && (GRC(c) || !(aborted[r] || rec[r])) ->
          launched[r]++; kc[r * C + launched[r] - 1] = c; c++
       :: else -> break
       od;
       if :: c > C -> hostdone[r] = true :: else -> skip fi
     }
#if GROUP_WORD
  /* abort_with's backend abort() (custom_backend.cpp:110-120, multimem_backend.cpp:95-110):
     after the abort word, the host writes the group's word into every workspace
     (publish_group_failure, group_failure.cpp:23-43; multimem through a one-thread kernel once
     its own kernel stopped). Through CUDA: not once this rank's context died of a trap. */
  :: atomic { LIVE && aborted[r] && !told[r] && !trapped[r] ->
       told[r] = true; xq = 0; do :: xq < W -> fw[xq] = true; xq++ :: else -> break od }
#endif
#if FAULT == 2
  :: atomic {
       LIVE && r == ABORTER && !aborted[r] && (ABORT_CALL == 0 || c == ABORT_CALL) &&
       !(hostdone[r] && kdone[r] == launched[r]) -> host_abort()
     }
#endif
  od  /* a host that made its calls stays here (an end state) */
#endif
  /* Then the host waits for its stream and reads the failure record: init does that read once
     every process has ended (nothing changes the record after the stream is drained). */
}

/* What a rank's next launch or host call turns into an error. */
#if GROUP_WORD
#define STICKY(x) (fw[x] || rec[x] || aborted[x] || trapped[x])
#else
#define STICKY(x) (rec[x] || aborted[x])
#endif

/* A host made its calls, and a stream ran every launch: or the rank's context died of a trap
   (then nothing more runs on it, and the next synchronisation fails). The host's abort write
   is part of its calls. */
#define HDONE(x) (trapped[x] || (hostdone[x] && (!aborted[x] || told[x] || !GROUP_WORD)))
#define SDONE(x) (trapped[x] || kdone[x] == launched[x])
init {
  byte r; byte b;
  atomic {
    r = 0;
    do
    :: r < W ->
       run Host(r);
       b = 0; do :: b < NB -> run Block(r, b); b++ :: else -> break od;
       r++
    :: else -> break
    od
  }
  /* The end: every host made its calls, and every launch ended (or STOP cut the search). */
  atomic {
    (!LIVE_AT_END ||
     ((HDONE(0) && HDONE(1) && (W < 3 || HDONE(2)) && (W < 4 || HDONE(3))) &&
      (SDONE(0) && SDONE(1) && (W < 3 || SDONE(2)) && (W < 4 || SDONE(3)))));
#if CHECK_VISIBLE
    /* Each host reads its record after its stream (a trap: the context's sticky error). */
    r = 0;
    do
    :: r < W ->
       if :: rec[r] || aborted[r] || trapped[r] -> error_seen[r] = true :: else -> skip fi;
       invisible_failure = any_failure && !(error_seen[r] || STICKY(r));
       assert(!invisible_failure);
       r++
    :: else -> break
    od
#endif
  }
}
