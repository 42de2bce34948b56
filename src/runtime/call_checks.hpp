// The checks of a call's buffers that need nothing but the call: run on the calling rank before
// the call is numbered or reaches a backend, so a refusal sends nothing to the peers; the caller
// aborts the communicator then, so that peers that made a valid call are told at once
// (CommunicatorState::refuse_unusable_buffers; docs/communicator.md, Buffers; docs/errors.md).
#pragma once

#include <cstddef>

#include "tpcomm/types.hpp"
#include "transport/common/backend.hpp"

namespace tpcomm::runtime {

// Refuses (kInvalidInput, naming the call, the ranges and the allowed form) a call of a group of
// `size` ranks, made by `rank`:
// - whose input or output byte size (count x element size, x size for the larger buffer of
//   all_gather and reduce_scatter) does not fit in size_t, or whose buffer runs past the end of
//   the address space;
// - whose input [input, input + in_bytes) and output [output, output + out_bytes) overlap other
//   than in the op's exact in-place form: all_reduce input == output; all_gather
//   input == output + rank * count elements; reduce_scatter output == input + rank * count
//   elements. The backends read peers' inputs and write outputs in an order that only those
//   forms survive (shm returned wrong data, to the caller and to a peer, for partial overlaps).
// - whose root (gather, scatter, reduce) is not a rank of the group, or (all_to_allv) whose
//   counts are missing or add up past size_t;
// - whose input or output is null where it holds elements (rooted calls: the root's larger
//   buffer; the other ranks may pass null there).
// Rooted calls' in-place forms are the root's: gather input == output + root * count elements,
// scatter output == input + root * count elements, reduce input == output; all_to_all has none.
// all_reduce_rmsnorm also goes through check_norm.
void check_call_buffers(const transport::Call& call, int rank, int size);

// all_reduce_rmsnorm's own (norm_checks.cpp): a floating-point type (float32, bfloat16,
// float16); a row length from 1 to 2^30 - 1 that divides the count; a weight; a residual_out
// with a residual; and no overlap among the input, output, residual,
// residual_out and weight but the two exact in-place forms (output == input, residual_out ==
// residual) and reads of one buffer by two roles.
void check_norm(const transport::Call& call, int rank);

// broadcast's buffer of `count` elements of `type`: its byte size fits in size_t and the buffer
// does not run past the end of the address space.
void check_broadcast_buffer(const void* buffer, std::size_t count, DataType type, int rank);

}  // namespace tpcomm::runtime
