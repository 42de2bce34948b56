"""The work object of a tpcomm backend call. tpcomm's calls do their work when they are issued:
a CPU call has finished when it returns, a CUDA call is enqueued on the current stream (the
stream later kernels run on), so there is nothing left for wait() to wait for."""

import torch
import torch.distributed as dist


class DoneWork(dist.Work):
    def __init__(self, result):
        super().__init__()
        self._result = result

    def wait(self, timeout=None):
        return True

    def is_completed(self):
        return True

    def is_success(self):
        return True

    def exception(self):
        return None

    def result(self):
        return self._result

    def get_future(self):
        future = torch.futures.Future()
        future.set_result(self._result)
        return future


class MessageWork(dist.Work):
    """A point-to-point message in flight (isend / irecv): wait() completes it through tpcomm's
    Request, progressing every message the rank started."""

    def __init__(self, request, result):
        super().__init__()
        self._request, self._result = request, result

    def wait(self, timeout=None):
        self._request.wait()
        return True

    def _source_rank(self):
        """The sender of a receive (torch's recv without src asks)."""
        self._request.wait()
        return self._request.source

    def is_completed(self):
        return self._request.done()

    def is_success(self):
        return self._request.done()

    def exception(self):
        return None

    def result(self):
        return self._result

    def get_future(self):
        self.wait()
        future = torch.futures.Future()
        future.set_result(self._result)
        return future
