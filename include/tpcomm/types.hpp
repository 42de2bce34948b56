// The vocabulary of tpcomm: element types, reductions, operations, backends, algorithms and
// modes, each with the one table of names that files, plans, messages and the CLI use.
#pragma once

#include <cstddef>
#include <iterator>
#include <optional>
#include <string_view>
#include <vector>

namespace tpcomm {

// Floating-point types are reduced in fp32 and rounded once; integer types exactly, a sum wrapping
// around as two's complement does (as NCCL's and Gloo's). All of them move bit for bit.
enum class DataType { kFloat32, kFloat16, kBFloat16, kInt32, kInt64, kUInt8 };
// kAvg is the sum divided by the world size (computed in fp32 before rounding); floating-point
// types only.
enum class ReduceOp { kSum, kMax, kMin, kAvg };
// The planned operations. all_to_all also carries all_to_allv (per-peer counts); gather,
// scatter and reduce are rooted; send_recv is point-to-point, a send and its matching receive
// (communicator.hpp); all_reduce_rmsnorm is a sum all-reduce of rows followed by the residual add
// and RMSNorm of a transformer layer (Communicator::all_reduce_rmsnorm).
enum class Op {
  kAllReduce,
  kAllGather,
  kReduceScatter,
  kAllToAll,
  kGather,
  kScatter,
  kReduce,
  kSendRecv,
  kAllReduceRmsNorm
};
// hier_mpi: hier with its lanes across nodes over MPI instead of Gloo (groups started by mpirun).
enum class Backend { kLocal, kCustom, kMultimem, kNccl, kShm, kGloo, kHier, kHierMpi };
// How a backend runs an operation (algorithms_of() in plan.hpp says which belong to which).
enum class Algorithm {
  kCopy,
  kOneShot,
  kTwoShot,
  kLdReduce,
  kSt,
  kNccl,
  kGloo,
  kHierarchical,
  kSingleCopy
};
// Eager calls, or calls captured in CUDA graphs (which get their own size tables).
enum class Mode { kEager, kGraph };

std::size_t size_of(DataType type);
constexpr bool is_floating(DataType type) {
  return type == DataType::kFloat32 || type == DataType::kFloat16 || type == DataType::kBFloat16;
}

// One name per value. Every enum of the vocabulary has exactly one table (Names<E>::table), in
// declaration order, so a value's name is table[value].
template <typename E>
struct NamedValue {
  E value;
  std::string_view name;
};

template <typename E>
struct Names;  // specialised for each enum with a name table

template <>
struct Names<DataType> {
  static constexpr NamedValue<DataType> table[] = {
      {DataType::kFloat32, "float32"},   {DataType::kFloat16, "float16"},
      {DataType::kBFloat16, "bfloat16"}, {DataType::kInt32, "int32"},
      {DataType::kInt64, "int64"},       {DataType::kUInt8, "uint8"}};
};
template <>
struct Names<ReduceOp> {
  static constexpr NamedValue<ReduceOp> table[] = {{ReduceOp::kSum, "sum"},
                                                   {ReduceOp::kMax, "max"},
                                                   {ReduceOp::kMin, "min"},
                                                   {ReduceOp::kAvg, "avg"}};
};
template <>
struct Names<Op> {
  static constexpr NamedValue<Op> table[] = {{Op::kAllReduce, "all_reduce"},
                                             {Op::kAllGather, "all_gather"},
                                             {Op::kReduceScatter, "reduce_scatter"},
                                             {Op::kAllToAll, "all_to_all"},
                                             {Op::kGather, "gather"},
                                             {Op::kScatter, "scatter"},
                                             {Op::kReduce, "reduce"},
                                             {Op::kSendRecv, "send_recv"},
                                             {Op::kAllReduceRmsNorm, "all_reduce_rmsnorm"}};
};
template <>
struct Names<Backend> {
  static constexpr NamedValue<Backend> table[] = {
      {Backend::kLocal, "local"}, {Backend::kCustom, "custom"},   {Backend::kMultimem, "multimem"},
      {Backend::kNccl, "nccl"},   {Backend::kShm, "shm"},         {Backend::kGloo, "gloo"},
      {Backend::kHier, "hier"},   {Backend::kHierMpi, "hier_mpi"}};
};
template <>
struct Names<Algorithm> {
  static constexpr NamedValue<Algorithm> table[] = {{Algorithm::kCopy, "copy"},
                                                    {Algorithm::kOneShot, "one_shot"},
                                                    {Algorithm::kTwoShot, "two_shot"},
                                                    {Algorithm::kLdReduce, "ld_reduce"},
                                                    {Algorithm::kSt, "st"},
                                                    {Algorithm::kNccl, "nccl"},
                                                    {Algorithm::kGloo, "gloo"},
                                                    {Algorithm::kHierarchical, "hierarchical"},
                                                    {Algorithm::kSingleCopy, "single_copy"}};
};
template <>
struct Names<Mode> {
  static constexpr NamedValue<Mode> table[] = {{Mode::kEager, "eager"}, {Mode::kGraph, "graph"}};
};

// Tables in declaration order, checked here once for every enum of the vocabulary.
template <typename E>
constexpr bool names_in_declaration_order() {
  int i = 0;
  for (const auto& entry : Names<E>::table) {
    if (static_cast<int>(entry.value) != i++) return false;
  }
  return true;
}
static_assert(names_in_declaration_order<DataType>() && names_in_declaration_order<ReduceOp>() &&
              names_in_declaration_order<Op>() && names_in_declaration_order<Backend>() &&
              names_in_declaration_order<Algorithm>() && names_in_declaration_order<Mode>());

template <typename E>
constexpr std::string_view name_of(E value) {
  const auto index = static_cast<std::size_t>(value);
  return index < std::size(Names<E>::table) ? Names<E>::table[index].name : "unknown";
}

// One plain overload per enum (no template: a generic to_string would be ambiguous with those of
// libraries found by argument-dependent lookup).
constexpr std::string_view to_string(DataType v) {
  return name_of(v);
}
constexpr std::string_view to_string(ReduceOp v) {
  return name_of(v);
}
constexpr std::string_view to_string(Op v) {
  return name_of(v);
}
constexpr std::string_view to_string(Backend v) {
  return name_of(v);
}
constexpr std::string_view to_string(Algorithm v) {
  return name_of(v);
}
constexpr std::string_view to_string(Mode v) {
  return name_of(v);
}

template <typename E>
constexpr std::optional<E> from_string(std::string_view name) {
  for (const auto& entry : Names<E>::table) {
    if (entry.name == name) return entry.value;
  }
  return std::nullopt;
}

template <typename E>
std::vector<std::string_view> names_of() {
  std::vector<std::string_view> names;
  for (const auto& entry : Names<E>::table) names.push_back(entry.name);
  return names;
}

template <typename E>
constexpr auto all_values() {
  constexpr std::size_t n = std::size(Names<E>::table);
  struct Values {
    E items[n];
    constexpr const E* begin() const { return items; }
    constexpr const E* end() const { return items + n; }
  } values{};
  for (std::size_t i = 0; i < n; ++i) values.items[i] = Names<E>::table[i].value;
  return values;
}

inline constexpr auto kAllOps = all_values<Op>();

// Whether the operation combines values (takes a ReduceOp), and whether it has a root.
constexpr bool reduces(Op op) {
  return op == Op::kAllReduce || op == Op::kReduceScatter || op == Op::kReduce;
}
constexpr bool is_rooted(Op op) {
  return op == Op::kGather || op == Op::kScatter || op == Op::kReduce;
}

}  // namespace tpcomm
