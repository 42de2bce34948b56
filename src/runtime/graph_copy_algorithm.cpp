#include "graph_copy_algorithm.hpp"

namespace tpcomm::runtime {

Algorithm unregistered_replay_algorithm(const TableRow& graph_row, const TableRow& eager_row) {
  if (graph_row.backend != Backend::kCustom) return graph_row.algorithm;
  if (eager_row.backend == Backend::kCustom) return eager_row.algorithm;
  return Algorithm::kTwoShot;
}

}  // namespace tpcomm::runtime
