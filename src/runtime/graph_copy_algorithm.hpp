// Which algorithm a captured custom all-reduce runs while its input is not registered
// (docs/gpu-graphs.md, "Copying replays take the eager table's algorithm"). The graph table's
// custom rows assume registered inputs (no copy-in), so they reach further than the eager table's;
// a program that never registers (or a call registration could not share) copies at every replay,
// where the eager table's choice is the one measured for copying. The kernel picks at each replay
// by the slot's flag, which is the same on every rank.
#pragma once

#include "tpcomm/plan.hpp"

namespace tpcomm::runtime {

// `graph_row`: the graph table's row for the call; `eager_row`: the eager table's row for the
// same bytes. Where the eager table gives the size to custom too, its algorithm; where it gives
// it to another backend (which a replay cannot switch to), two-shot, the custom algorithm that
// moves the fewest bytes per rank at sizes past the custom eager range. Only meaningful when
// graph_row is custom; otherwise graph_row's algorithm.
Algorithm unregistered_replay_algorithm(const TableRow& graph_row, const TableRow& eager_row);

}  // namespace tpcomm::runtime
