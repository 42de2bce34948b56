"""What the Python suite (tests/python) and the engine tests (tests/engines) share: the helpers
every rank program starts with, and the time limit every test runs under."""

import contextlib
import signal

# Put after a rank program's own imports (RANK defined): ok() reports the rank's success,
# refused() asserts that a call raises `kind` with `says` in its message. Braces are doubled:
# the text goes through str.format.
RANK_HELPERS = """
def ok(what="done"):
    print(f"OK rank {{RANK}}: {{what}}", flush=True)
def refused(call, says, kind=ValueError):
    try:
        call()
    except kind as e:
        assert says in str(e), (says, str(e))
    else:
        raise AssertionError(f"no {{kind.__name__}} for: {{says}}")
"""


@contextlib.contextmanager
def time_limit(seconds):
    """A SIGALRM that fails the test after `seconds` (an autouse fixture yields inside it)."""

    def expired(signum, frame):
        raise TimeoutError(f"the test ran past its limit of {seconds} s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
