"""One log line per process and key: every group and rank of an engine would otherwise repeat a
notice (a fallback, a feature that turns off) many times."""

import threading

_logged = set()
_lock = threading.Lock()


def log_once(logger, level, key, message, *args):
    with _lock:
        if key in _logged:
            return
        _logged.add(key)
    logger.log(level, message, *args)
