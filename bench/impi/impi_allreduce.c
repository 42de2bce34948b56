// In-place MPI_Allreduce under Intel MPI, timed as tpcomm bench times its engines
// (tools/bench/bench_timing.cpp), so that its rows can stand beside tpcomm's. A program of its
// own, built and run by scripts/bench-impi.sh against .venv-impi's Intel MPI: the library and
// tpcomm bench link Debian's Open MPI, and Intel's libmpi must never reach them.
//
// impi_allreduce [-b MIN] [-e MAX] [-f FACTOR] [--dtype float32|bfloat16|all]
//                [--warmup W] [--iters I] [--json FILE]
#define _GNU_SOURCE
#include <mpi.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

// The same constants as bench_timing.cpp / bench_timing.hpp: with --iters 0 a size runs as many
// calls as fit in 25 ms (35 at least, 100000 at most) in five batches; the first size gets 1000
// warm-up calls (the ranks have just started; the scheduler is still placing them).
enum { kBatches = 5, kAutoMinIters = 35, kAutoMaxIters = 100000, kFirstRowWarmup = 1000 };
static const double kAutoTimeUs = 25000;

#ifndef MPIX_BFLOAT16
#error "this Intel MPI's mpi.h has no MPIX_BFLOAT16"
#endif

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);  // std::chrono::steady_clock on Linux
  return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static double max_over_ranks(double v) {
  double m;
  MPI_Allreduce(&v, &m, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return m;
}

static int cmp_double(const void* a, const void* b) {
  const double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

typedef struct {
  const char* name;
  MPI_Datatype type;
  size_t size;
} Dtype;

typedef struct {
  void* buf;
  int count;
  const Dtype* dt;
} Call;

static void call(const Call* c) {
  MPI_Allreduce(MPI_IN_PLACE, c->buf, c->count, c->dt->type, MPI_SUM, MPI_COMM_WORLD);
}

// tpcomm's time_calls: one untimed call lines the ranks up before the warm-up and before each
// batch (a barrier releases the ranks apart; that skew must not be charged to a batch); the
// slowest rank's warm-up mean sizes the batches; best and median batch, each the slowest rank's.
static void time_calls(const Call* c, int warmup, int iters, double* best, double* median) {
  call(c);
  const double w0 = now_us();
  for (int i = 0; i < warmup; ++i) call(c);
  if (iters == 0) {
    const double warm = warmup > 0 ? (now_us() - w0) / warmup : kAutoTimeUs / kAutoMinIters;
    const double slowest = max_over_ranks(warm);
    double n = kAutoTimeUs / (slowest > 1e-3 ? slowest : 1e-3);
    n = n < kAutoMinIters ? kAutoMinIters : n > kAutoMaxIters ? kAutoMaxIters : n;
    iters = (int)n;
  }
  double means[kBatches];
  const int n = iters / kBatches > 1 ? iters / kBatches : 1;
  for (int b = 0; b < kBatches; ++b) {
    MPI_Barrier(MPI_COMM_WORLD);
    call(c);
    const double t0 = now_us();
    for (int i = 0; i < n; ++i) call(c);
    means[b] = (now_us() - t0) / n;
  }
  qsort(means, kBatches, sizeof(double), cmp_double);
  *best = max_over_ranks(means[0]);
  *median = max_over_ranks(means[kBatches / 2]);
}

// tpcomm bench's inputs (bench_data.cpp): small integers, so every sum is exact, in bf16 too.
static float value_of(int rank, size_t i) {
  return (float)((rank + 1) * ((i % 7) + 1) % 16);
}

static void put(const Dtype* dt, void* buf, size_t i, float v) {
  if (dt->size == 4) {
    ((float*)buf)[i] = v;
  } else {  // bf16: the float's upper half, exact for these values
    uint32_t u;
    memcpy(&u, &v, 4);
    ((uint16_t*)buf)[i] = (uint16_t)(u >> 16);
  }
}

static float get(const Dtype* dt, const void* buf, size_t i) {
  if (dt->size == 4) return ((const float*)buf)[i];
  const uint32_t u = (uint32_t)((const uint16_t*)buf)[i] << 16;
  float v;
  memcpy(&v, &u, 4);
  return v;
}

static void fill(const Call* c, int rank) {
  for (size_t i = 0; i < (size_t)c->count; ++i) put(c->dt, c->buf, i, value_of(rank, i));
}

// Elements of one fresh call's result that differ from the exact sum, over every rank, with
// tpcomm bench's tolerance (exact at small W; bf16 partial sums round past 256).
static long long check(const Call* c, int rank, int w) {
  fill(c, rank);
  call(c);
  long long wrong = 0;
  for (size_t i = 0; i < (size_t)c->count; ++i) {
    float expect = 0;
    for (int r = 0; r < w; ++r) expect += value_of(r, i);
    const float got = get(c->dt, c->buf, i);
    const float tol = (c->dt->size == 4 ? 1e-5f : 8e-3f) * (expect > 1 ? expect : 1);
    if (!(got >= expect - tol && got <= expect + tol)) {
      if (wrong == 0) {
        fprintf(stderr, "impi_allreduce: rank %d %s count %d: element %zu is %g, expected %g\n",
                rank, c->dt->name, c->count, i, got, expect);
      }
      ++wrong;
    }
  }
  long long total;
  MPI_Allreduce(&wrong, &total, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
  return total;
}

// nccl-tests' units, as tpcomm bench reads them: K, M, G, KiB, MiB, GiB, any case, powers of 1024.
static long long parse_bytes(const char* s) {
  static const char units[] = "kmg";
  char* end;
  long long v = strtoll(s, &end, 10);
  const char* u = *end ? strchr(units, end[0] | 0x20) : NULL;
  if (end == s || v <= 0 || (*end && (!u || !*u || (end[1] && strcasecmp(end + 1, "ib"))))) {
    fprintf(stderr, "impi_allreduce: not a size in bytes: %s\n", s);
    exit(2);
  }
  for (long i = 0; u && i <= u - units; ++i) v *= 1024;
  return v;
}

// This rank's CPUs as the kernel has them, as a list ("0", "2-3,6").
static void cpu_list(char* out, size_t len) {
  cpu_set_t set;
  out[0] = 0;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) {
    snprintf(out, len, "?");
    return;
  }
  size_t used = 0;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (!CPU_ISSET(c, &set)) continue;
    int last = c;
    while (last + 1 < CPU_SETSIZE && CPU_ISSET(last + 1, &set)) ++last;
    used += snprintf(out + used, len - used, used ? ",%d" : "%d", c);
    if (last > c && used < len) used += snprintf(out + used, len - used, "-%d", last);
    if (used >= len) break;
    c = last;
  }
}

typedef struct {
  long long min_b, max_b, factor;
  int warmup, iters, first_dt, last_dt;
  const char* json;
} Args;

// 0 on success; nonzero on a bad command line.
static int parse_args(int argc, char** argv, Args* a) {
  *a = (Args){4096, 16 << 20, 4, 10, 0, 0, 1, NULL};
  for (int i = 1; i + 1 < argc; i += 2) {
    const char *k = argv[i], *v = argv[i + 1];
    if (!strcmp(k, "-b"))
      a->min_b = parse_bytes(v);
    else if (!strcmp(k, "-e"))
      a->max_b = parse_bytes(v);
    else if (!strcmp(k, "-f"))
      a->factor = atoll(v);
    else if (!strcmp(k, "--warmup"))
      a->warmup = atoi(v);
    else if (!strcmp(k, "--iters"))
      a->iters = atoi(v);
    else if (!strcmp(k, "--json"))
      a->json = v;
    else if (!strcmp(k, "--dtype") && !strcmp(v, "float32"))
      a->first_dt = 0, a->last_dt = 0;
    else if (!strcmp(k, "--dtype") && !strcmp(v, "bfloat16"))
      a->first_dt = 1, a->last_dt = 1;
    else if (!strcmp(k, "--dtype") && !strcmp(v, "all"))
      a->first_dt = 0, a->last_dt = 1;
    else
      return 1;
  }
  // Counts are ints (the element count of the largest float32 buffer, then bf16's).
  return argc % 2 == 0 || a->factor < 2 || a->min_b > a->max_b || a->warmup < 0 || a->iters < 0 ||
         a->max_b / 2 > 0x7fffffffLL;
}

// What a row is worth without its run: the library, the pinning and every rank's CPUs (tpcomm
// bench's second header line), and how bf16 is summed.
static void print_header(int w, const char* version, const char* every, size_t stride) {
  printf("# impi_allreduce: MPI_Allreduce in place, sum, on %d ranks\n", w);
  printf("# library: %s\n", version);
  const char* vars[] = {"I_MPI_PIN", "I_MPI_PIN_DOMAIN", "I_MPI_PIN_PROCESSOR_LIST",
                        "I_MPI_PIN_ORDER", "I_MPI_FABRICS"};
  printf("# settings:");
  for (size_t i = 0; i < sizeof(vars) / sizeof(*vars); ++i) {
    const char* v = getenv(vars[i]);
    printf(" %s=%s", vars[i], v ? v : "(unset)");
  }
  printf("\n# CPUs of each rank:");
  for (int r = 0; r < w; ++r) printf("%s %s", r ? " |" : "", every + (size_t)r * stride);
  printf("\n# bfloat16: MPIX_BFLOAT16 with MPI_SUM (Intel MPI's own bf16 reduction)\n");
  printf(
      "# time: best of %d batch means, slowest rank (tpcomm bench's method); "
      "spread = median / best\n",
      kBatches);
  printf("#%11s %9s %10s %7s\n", "size", "dtype", "time_us", "spread");
  fflush(stdout);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, w;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &w);
  Args a;
  if (parse_args(argc, argv, &a)) {
    if (rank == 0) {
      fprintf(stderr,
              "usage: impi_allreduce [-b MIN] [-e MAX] [-f FACTOR] "
              "[--dtype float32|bfloat16|all] [--warmup W] [--iters I] [--json FILE]\n");
    }
    MPI_Finalize();
    return 2;
  }
  static const Dtype all[] = {{"float32", MPI_FLOAT, 4}, {"bfloat16", MPIX_BFLOAT16, 2}};

  // Set up the connections before the first row is timed (as tpcomm's MPI engine does).
  MPI_Barrier(MPI_COMM_WORLD);
  char cpus[256];
  cpu_list(cpus, sizeof(cpus));
  char* every = rank == 0 ? malloc((size_t)w * sizeof(cpus)) : NULL;
  MPI_Gather(cpus, sizeof(cpus), MPI_CHAR, every, sizeof(cpus), MPI_CHAR, 0, MPI_COMM_WORLD);
  FILE* js = NULL;
  if (rank == 0) {
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int len;
    MPI_Get_library_version(version, &len);
    version[strcspn(version, "\n")] = 0;
    print_header(w, version, every, sizeof(cpus));
    if (a.json && !(js = fopen(a.json, "w"))) {
      perror(a.json);
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
    if (js) fprintf(js, "{\"library\": \"%s\", \"world_size\": %d, \"rows\": [", version, w);
  }

  long long wrong_total = 0;
  int rows = 0;
  for (int d = a.first_dt; d <= a.last_dt; ++d) {
    for (long long bytes = a.min_b; bytes <= a.max_b; bytes *= a.factor) {
      // 64-byte aligned, as tpcomm bench's buffers and PyTorch's tensors are.
      Call c = {aligned_alloc(64, (size_t)(bytes + 63) / 64 * 64),
                (int)(bytes / (long long)all[d].size), &all[d]};
      if (!c.buf) MPI_Abort(MPI_COMM_WORLD, 2);
      fill(&c, rank);
      const int first = bytes == a.min_b && a.warmup < kFirstRowWarmup;
      double best, median;
      time_calls(&c, first ? kFirstRowWarmup : a.warmup, a.iters, &best, &median);
      const long long wrong = check(&c, rank, w);
      wrong_total += wrong;
      free(c.buf);
      if (rank != 0) continue;
      printf("%12lld %9s %10.2f %7.2f%s\n", bytes, all[d].name, best, median / best,
             wrong ? "  WRONG" : "");
      fflush(stdout);
      if (!js) continue;
      fprintf(js, "%s\n  {\"size\": %lld, \"dtype\": \"%s\", \"time_us\": %.3f, ",
              rows++ ? "," : "", bytes, all[d].name, best);
      fprintf(js, "\"spread\": %.3f, \"wrong\": %lld, \"rank_cpus\": [", median / best, wrong);
      for (int r = 0; r < w; ++r) fprintf(js, "%s\"%s\"", r ? ", " : "", every + r * sizeof(cpus));
      fprintf(js, "]}");
    }
  }
  if (js) {
    fprintf(js, "\n]}\n");
    fclose(js);
  }
  if (rank == 0 && wrong_total) {
    fprintf(stderr, "impi_allreduce: FAILED: %lld wrong elements (see above)\n", wrong_total);
  }
  free(every);
  MPI_Finalize();
  return wrong_total ? 1 : 0;
}
