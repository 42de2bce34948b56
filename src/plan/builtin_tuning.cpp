// The built-in tuning tables. Thresholds follow public figures for NVLink systems: vLLM's custom
// all-reduce runs one-shot up to 512 KiB at W <= 4 and 256 KiB at W <= 8 (sm90), two-shot above,
// and hands over to NCCL past 8 MiB; its multicast (symmetric memory) all-reduce pays off from a
// few hundred KiB to 32-64 MiB on sm90 at W >= 4 and up to 128 MiB at W >= 6 on sm100. In graph
// mode our buffers are registered once, no copy into the workspace is paid, so custom's ranges
// double. CPU shm: see cpu_entry.
#include <algorithm>

#include "tpcomm/tuning.hpp"

namespace tpcomm {
namespace {

constexpr std::uint64_t KiB = 1024;
constexpr std::uint64_t MiB = 1024 * KiB;

struct CudaThresholds {
  std::uint64_t one_shot_max;
  std::uint64_t two_shot_max;
  std::uint64_t multimem_max;  // 0: multimem not preferred at this size class
  bool multimem_before_two_shot;
  std::uint64_t gather_max;  // custom all-gather / reduce-scatter (bytes of the full buffer)
};

CudaThresholds cuda_thresholds(int sm, int w) {
  const int band = w == 2 ? 0 : w <= 4 ? 1 : w <= 8 ? 2 : 3;
  if (sm >= 100) {
    static const CudaThresholds t[] = {{512 * KiB, 2 * MiB, 8 * MiB, false, 2 * MiB},
                                       {256 * KiB, 2 * MiB, 32 * MiB, false, 2 * MiB},
                                       {128 * KiB, 1 * MiB, 128 * MiB, true, 2 * MiB},
                                       {64 * KiB, 1 * MiB, 128 * MiB, true, 1 * MiB}};
    return t[band];
  }
  if (sm >= 90) {
    static const CudaThresholds t[] = {{1 * MiB, 8 * MiB, 0, false, 2 * MiB},
                                       {512 * KiB, 8 * MiB, 32 * MiB, true, 2 * MiB},
                                       {256 * KiB, 8 * MiB, 64 * MiB, true, 2 * MiB},
                                       {64 * KiB, 4 * MiB, 64 * MiB, true, 1 * MiB}};
    return t[band];
  }
  static const CudaThresholds t[] = {{512 * KiB, 8 * MiB, 0, false, 2 * MiB},
                                     {512 * KiB, 8 * MiB, 0, false, 2 * MiB},
                                     {256 * KiB, 8 * MiB, 0, false, 2 * MiB},
                                     {64 * KiB, 2 * MiB, 0, false, 1 * MiB}};
  return t[band];
}

int blocks_for(int sm) {
  return sm >= 100 ? 48 : sm >= 90 ? 36 : 32;
}

Candidate use(Backend b, Algorithm algorithm, std::optional<int> blocks = std::nullopt) {
  return Candidate{b, algorithm, blocks, std::nullopt};
}

TuningEntry cuda_entry(int sm, int w, Mode mode) {
  CudaThresholds t = cuda_thresholds(sm, w);
  if (mode == Mode::kGraph) {
    t.one_shot_max *= 2;
    t.two_shot_max *= 2;
    t.gather_max *= 2;
  }
  const int blocks = blocks_for(sm);
  const Candidate one_shot = use(Backend::kCustom, Algorithm::kOneShot, blocks);
  const Candidate two_shot = use(Backend::kCustom, Algorithm::kTwoShot, blocks);
  const Candidate mm_reduce = use(Backend::kMultimem, Algorithm::kLdReduce, blocks);
  const Candidate mm_store = use(Backend::kMultimem, Algorithm::kSt, blocks);
  const Candidate nccl = use(Backend::kNccl, Algorithm::kNccl);
  const bool multimem = t.multimem_max > 0;

  TuningEntry e;
  e.key = {DeviceType::kCuda, sm, w, mode};
  auto& ar = e.ops[Op::kAllReduce];
  ar.push_back({t.one_shot_max, {one_shot, mm_reduce, nccl}});
  if (multimem && t.multimem_before_two_shot) {
    ar.push_back({t.two_shot_max, {mm_reduce, two_shot, nccl}});
  } else {
    ar.push_back({t.two_shot_max, {two_shot, nccl}});
  }
  if (multimem && t.multimem_max > t.two_shot_max)
    ar.push_back({t.multimem_max, {mm_reduce, nccl}});
  ar.push_back({std::nullopt, {nccl}});

  const std::uint64_t mm_max = multimem ? std::max(t.multimem_max, t.gather_max) : 0;
  auto& ag = e.ops[Op::kAllGather];
  ag.push_back({t.gather_max, {use(Backend::kCustom, Algorithm::kOneShot, blocks), nccl}});
  if (mm_max > t.gather_max) ag.push_back({mm_max, {mm_store, nccl}});
  ag.push_back({std::nullopt, {nccl}});

  auto& rs = e.ops[Op::kReduceScatter];
  rs.push_back({t.gather_max, {use(Backend::kCustom, Algorithm::kOneShot, blocks), nccl}});
  if (mm_max > t.gather_max) rs.push_back({mm_max, {mm_reduce, nccl}});
  rs.push_back({std::nullopt, {nccl}});
  // NCCL's grouped sends and receives, and ncclReduce: tpcomm has no GPU kernels of its own for
  // these.
  // all_reduce + residual + RMSNorm: the all-reduce's custom rows with the epilogue fused into
  // the kernels (no multimem form); NCCL beyond, unfused (an fp32 all-reduce, then the kernel).
  e.ops[Op::kAllReduceRmsNorm] = {{t.one_shot_max, {one_shot, nccl}},
                                  {t.two_shot_max, {two_shot, nccl}},
                                  {std::nullopt, {nccl}}};
  for (Op op : {Op::kAllToAll, Op::kGather, Op::kScatter, Op::kReduce, Op::kSendRecv}) {
    e.ops[op] = {{std::nullopt, {nccl}}};
  }
  return e;
}

// W = 2 stays one-shot at every size: each rank reads the peer's whole buffer either way (two-shot
// reads half, then the other half reduced), and one-shot needs one wait instead of two. Measured
// on 2 cores, one-shot was 25-30% faster from 128 KiB to 16 MiB, with the AVX-512 and the AVX2
// kernels alike (tpcomm tune, TPCOMM_CPU_KERNELS). From three ranks on, one-shot reads W - 1
// buffers against two-shot's 2 (W - 1) / W. W = 4, ranks sharing 2 cores: one-shot 1.11-1.21x
// ahead at 64 KiB by the median of five alternations with either kernel, and in two tunes of
// three; two-shot ahead from 256 KiB (docs/tuning.md). (Before tpcomm bench stopped timing the
// store barrier's skew, tunes had put two-shot ahead at 64 KiB, and the switch at 32 KiB.) Not
// raised to 128 KiB, where one-shot led here too: a second wait costs most when ranks share
// cores, so where each has its own two-shot can only gain.
TuningEntry cpu_entry(int w) {
  const std::uint64_t one_shot_max = w <= 4 ? 64 * KiB : w <= 8 ? 32 * KiB : 16 * KiB;
  const Candidate gloo = use(Backend::kGloo, Algorithm::kGloo);
  const Candidate hier = use(Backend::kHier, Algorithm::kHierarchical);
  // Across nodes, MPI lanes where the group has them (started by mpirun): Open MPI's TCP
  // transport carried the lanes faster than Gloo at every size measured
  // (docs/results/cpu-2026-12-04-nodes.md, "Across nodes"); Gloo's lanes otherwise.
  const Candidate hier_mpi = use(Backend::kHierMpi, Algorithm::kHierarchical);
  TuningEntry e;
  e.key = {DeviceType::kCpu, std::nullopt, w, std::nullopt};
  if (w == 2) {
    // Above 256 KiB in steps of 128 KiB rather than of 512 KiB: since the slots take turns
    // (step_slot) a call's steps and both lanes stay in the cache beside its buffers (Xeon VM,
    // 2 vCPUs, tpcomm tune out of place, best of 3: 1 MiB 143 -> 110 us, 4 MiB 615 -> 543,
    // 16 MiB 2609 -> 2310; in place 1 MiB 90-95 -> 71-77, 4 MiB 460-490 -> 398-410; 64 KiB steps
    // level with 128 KiB, 256 KiB between; docs/results/cpu-2026-12-05-impi.md).
    Candidate small_steps = use(Backend::kShm, Algorithm::kOneShot);
    small_steps.step_bytes = 128 * KiB;
    e.ops[Op::kAllReduce] = {
        {256 * KiB, {use(Backend::kShm, Algorithm::kOneShot), hier_mpi, hier, gloo}},
        {std::nullopt, {small_steps, hier_mpi, hier, gloo}}};
  } else {
    e.ops[Op::kAllReduce] = {
        {one_shot_max, {use(Backend::kShm, Algorithm::kOneShot), hier_mpi, hier, gloo}},
        {std::nullopt, {use(Backend::kShm, Algorithm::kTwoShot), hier_mpi, hier, gloo}}};
  }
  // All-gather, W = 2: each peer's input read where it lies (single copy) for outputs above
  // 64 KiB; below, the system call and the closing barrier cost more than the second copy through
  // the lanes (tpcomm tune on a Zen 5 VM, 5 rounds: one_shot 1.43-1.47x ahead at 64 KiB, the two
  // even at 128 KiB, single_copy 5-30% ahead from 256 KiB to 8 MiB). W = 3 and 4 on 2 cores:
  // through the lanes at every size (single_copy 1.3-3.2x slower: every rank waits until all its
  // peers have read it, costly when ranks share cores); larger groups (unmeasured) alike.
  // Across hosts, hier before gloo for every op: its stages inside a node go over shm where
  // Gloo would send every byte through TCP.
  if (w == 2) {
    e.ops[Op::kAllGather] = {
        {64 * KiB, {use(Backend::kShm, Algorithm::kOneShot), hier_mpi, hier, gloo}},
        {std::nullopt, {use(Backend::kShm, Algorithm::kSingleCopy), hier_mpi, hier, gloo}}};
  } else {
    e.ops[Op::kAllGather] = {
        {std::nullopt, {use(Backend::kShm, Algorithm::kOneShot), hier_mpi, hier, gloo}}};
  }
  e.ops[Op::kReduceScatter] = {
      {std::nullopt, {use(Backend::kShm, Algorithm::kOneShot), hier_mpi, hier, gloo}}};
  // all_to_all, W = 2: each peer's block read where it lies above 64 KiB, as
  // all_gather. Across nodes hier up to 1 MiB: 4 ranks on 2 simulated nodes (2 vCPUs), bf16,
  // hier / Gloo 1.2-33x ahead from 64 KiB to 1 MiB (noisy), 0.54-0.62x from 4 MiB, where its
  // stages' extra copies cost more than the messages it saves (docs/results, exchanges).
  // The rooted calls across nodes: hier's stages send each node's blocks between nodes
  // together, which Gloo sends rank by rank; a reduce sends only 1/L of them per rank, in L lanes
  // at once. 4 ranks on 2 simulated nodes (2 vCPUs, loopback TCP), bf16, hier / Gloo: gather
  // 1.6x ahead at 16 KiB, even at 256 KiB, 0.9x at 4 MiB; scatter 1.7x, 1.7x, 0.85x; reduce
  // 1.6x, 1.1x, 1.4x (docs/results, exchanges). So gather and scatter as all_to_all: Gloo above
  // 1 MiB, where the stages' copies cost more than the messages they save. Messages: shm's
  // mailboxes on one node, Gloo's pairs across nodes (hier has none).
  const Candidate shm_rooted = use(Backend::kShm, Algorithm::kOneShot);
  for (Op op : {Op::kGather, Op::kScatter}) {
    e.ops[op] = {{1 * MiB, {shm_rooted, hier_mpi, hier, gloo}}, {std::nullopt, {shm_rooted, gloo}}};
  }
  e.ops[Op::kReduce] = {{std::nullopt, {shm_rooted, hier_mpi, hier, gloo}}};
  // all_reduce + residual + RMSNorm: the all-reduce's rows. shm fuses the epilogue into its
  // one-shot (each rank sums every row and normalises its copy) and its two-shot (each its share
  // of the rows); hier and gloo all-reduce in float32, then add and normalise (fuses_rmsnorm).
  e.ops[Op::kAllReduceRmsNorm] = e.ops[Op::kAllReduce];
  e.ops[Op::kSendRecv] = {{std::nullopt, {use(Backend::kShm, Algorithm::kOneShot), gloo}}};
  const Candidate lanes = use(Backend::kShm, Algorithm::kOneShot);
  const Candidate direct = use(Backend::kShm, Algorithm::kSingleCopy);
  e.ops[Op::kAllToAll] = {{1 * MiB, {lanes, hier_mpi, hier, gloo}}, {std::nullopt, {lanes, gloo}}};
  if (w == 2) {
    e.ops[Op::kAllToAll] = {{64 * KiB, {lanes, hier_mpi, hier, gloo}},
                            {1 * MiB, {direct, hier_mpi, hier, gloo}},
                            {std::nullopt, {direct, gloo}}};
  }
  return e;
}

Tuning make_builtin() {
  Tuning t;
  t.source = "built-in";
  for (int sm : {80, 90, 100}) {
    for (int w = 2; w <= 16; ++w) {
      for (Mode mode : {Mode::kEager, Mode::kGraph}) t.entries.push_back(cuda_entry(sm, w, mode));
    }
  }
  for (int w = 2; w <= 16; ++w) t.entries.push_back(cpu_entry(w));
  return t;
}

}  // namespace

const Tuning& builtin_tuning() {
  static const Tuning builtin = make_builtin();
  return builtin;
}

}  // namespace tpcomm
