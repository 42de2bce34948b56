"""tpcomm in the engines' own seams (docs/engines.md):

- TpcommCustomAllreduce: an object with the custom all-reduce interface vLLM and SGLang build
  from a TP group's CPU (Gloo) process group and device (.disabled, .should_custom_ar(t),
  .custom_all_reduce(t), .capture(), .close()), served by a tpcomm.Communicator;
- tpcomm.engines.vllm_plugin: a `vllm.general_plugins` entry point whose platform hands vLLM a
  device communicator (vllm_communicator) serving the TP group's all_reduce, all_gather and
  reduce_scatter through tpcomm;
- tpcomm.engines.sglang_plugin: a `sglang.srt.plugins` entry point that makes SGLang's custom
  all-reduce dispatch return TpcommCustomAllreduce.

Neither engine is imported here: the plugin modules import theirs when the engine loads them."""

from .custom_all_reduce import TpcommCustomAllreduce

__all__ = ["TpcommCustomAllreduce"]
