// A bounded mutation fuzzer for `make test`: `tpcomm_fuzz TARGET DIR[:DIR...] [SECONDS|Nx] [SEED]`
// runs every file of the corpus folders through the target, then mutates corpus entries (bit flips,
// byte changes, insertions, deletions, splices of two entries, interesting numbers) until the time
// is up. The seed is printed, so a failing run can be repeated; a bug aborts the process with the
// input written to fuzz-crash-<target>.bin. The same targets build for libFuzzer as well
// (LLVMFuzzerTestOneInput below, docs/testing.md).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>

#include "fuzz_targets.hpp"

namespace {

using Input = std::vector<std::uint8_t>;

// Every regular file of every folder in `dirs` (separated by ':'), .tsv expectations excepted.
std::vector<Input> read_corpus(const std::string& dirs) {
  std::vector<Input> corpus;
  std::size_t begin = 0;
  while (begin <= dirs.size()) {
    const std::size_t end = std::min(dirs.find(':', begin), dirs.size());
    for (const auto& entry : std::filesystem::directory_iterator(dirs.substr(begin, end - begin))) {
      if (!entry.is_regular_file() || entry.path().extension() == ".tsv") continue;
      std::ifstream in(entry.path(), std::ios::binary);
      corpus.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
    begin = end + 1;
  }
  return corpus;
}

const char* const kInteresting[] = {"1E400",      "-1",   "0",  "4294967296", "9223372036854775808",
                                    "\"\"",       "null", "[]", "{}",         "1e-400",
                                    "\"\\u0000\""};

Input mutate(const std::vector<Input>& corpus, std::mt19937_64& rng) {
  auto pick = [&](std::size_t n) { return n == 0 ? 0 : static_cast<std::size_t>(rng() % n); };
  Input x = corpus[pick(corpus.size())];
  const int rounds = 1 + static_cast<int>(rng() % 4);
  for (int i = 0; i < rounds; ++i) {
    switch (rng() % 6) {
      case 0:  // flip a bit
        if (!x.empty()) x[pick(x.size())] ^= static_cast<std::uint8_t>(1u << (rng() % 8));
        break;
      case 1:  // set a byte
        if (!x.empty()) x[pick(x.size())] = static_cast<std::uint8_t>(rng());
        break;
      case 2:  // insert bytes
        x.insert(x.begin() + static_cast<long>(pick(x.size() + 1)), 1 + rng() % 8,
                 static_cast<std::uint8_t>(rng()));
        break;
      case 3:  // delete a range
        if (!x.empty()) {
          const std::size_t at = pick(x.size());
          x.erase(x.begin() + static_cast<long>(at),
                  x.begin() + static_cast<long>(std::min(x.size(), at + 1 + rng() % 16)));
        }
        break;
      case 4: {  // splice: our head, another entry's tail
        const Input& y = corpus[pick(corpus.size())];
        x.resize(pick(x.size() + 1));
        x.insert(x.end(), y.begin() + static_cast<long>(pick(y.size() + 1)), y.end());
        break;
      }
      default: {  // an interesting number or token in place of a few bytes
        const char* t = kInteresting[pick(std::size(kInteresting))];
        const std::size_t at = pick(x.size() + 1);
        x.erase(x.begin() + static_cast<long>(at),
                x.begin() + static_cast<long>(std::min(x.size(), at + rng() % 4)));
        x.insert(x.begin() + static_cast<long>(at), t, t + std::strlen(t));
      }
    }
  }
  return x;
}

}  // namespace

#ifdef TPCOMM_LIBFUZZER
extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const auto* target = [] {
    const char* name = std::getenv("TPCOMM_FUZZ_TARGET");
    for (const auto& t : tpcomm::fuzz::targets()) {
      if (name != nullptr && t.name == name) return &t;
    }
    std::fprintf(stderr, "set TPCOMM_FUZZ_TARGET to facts, tuning or store\n");
    std::abort();
  }();
  target->run(data, size);
  return 0;
}
#else
int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s facts|tuning|store DIR[:DIR...] [SECONDS|Nx] [SEED]\n",
                 argv[0]);
    return 2;
  }
  const tpcomm::fuzz::Target* target = nullptr;
  for (const auto& t : tpcomm::fuzz::targets()) {
    if (t.name == argv[1]) target = &t;
  }
  if (target == nullptr) {
    std::fprintf(stderr, "unknown target %s (facts, tuning, store)\n", argv[1]);
    return 2;
  }
  // "8": eight seconds; "200x": exactly 200 mutated inputs (a repeatable run).
  const std::string budget = argc > 3 ? argv[3] : "10";
  const bool counted = !budget.empty() && budget.back() == 'x';
  const double seconds = counted ? 0 : std::atof(budget.c_str());
  const long count = counted ? std::atol(budget.c_str()) : 0;
  const std::uint64_t seed =
      argc > 4
          ? std::strtoull(argv[4], nullptr, 10)
          : static_cast<std::uint64_t>(std::chrono::system_clock::now().time_since_epoch().count());
  const auto corpus = read_corpus(argv[2]);
  if (corpus.empty()) {
    std::fprintf(stderr, "the corpus %s is empty\n", argv[2]);
    return 2;
  }
  std::printf("fuzz %s: %zu corpus entries, %s, seed %llu\n", argv[1], corpus.size(),
              counted ? (std::to_string(count) + " inputs").c_str() : (budget + " s").c_str(),
              static_cast<unsigned long long>(seed));
  std::fflush(stdout);
  const std::string crash_path = std::string("fuzz-crash-") + argv[1] + ".bin";
  auto run = [&](const Input& x) {
    {  // written before the run, removed after: what is left names the input that killed us
      std::ofstream out(crash_path, std::ios::binary);
      out.write(reinterpret_cast<const char*>(x.data()), static_cast<long>(x.size()));
    }
    target->run(x.data(), x.size());
  };
  for (const auto& x : corpus) run(x);
  std::mt19937_64 rng(seed);
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  long runs = 0;
  while (counted ? runs < count : std::chrono::steady_clock::now() < until) {
    run(mutate(corpus, rng));
    ++runs;
  }
  tpcomm::fuzz::stop_targets();
  std::filesystem::remove(crash_path);
  std::printf("fuzz %s: %ld mutated inputs, no bug\n", argv[1], runs);
  return 0;
}
#endif
