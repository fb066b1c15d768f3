"""cProfile one `layby.cli serve <service>` of a benchmark's `layby up`, without touching it.

bench/chat_channels.py ``--profile SERVICE`` puts this folder on the services' ``PYTHONPATH``
with ``BENCH_PROFILE_SERVICE`` / ``BENCH_PROFILE_OUT`` set; the named service's main thread is
profiled from start to exit and the stats dumped to ``BENCH_PROFILE_OUT``.
"""

import atexit
import os
import sys

_service = os.environ.get("BENCH_PROFILE_SERVICE")
if _service and sys.argv[-2:] == ["serve", _service]:
    import cProfile

    _profiler = cProfile.Profile()
    _profiler.enable()

    def _dump() -> None:
        _profiler.disable()
        _profiler.dump_stats(os.environ["BENCH_PROFILE_OUT"])

    atexit.register(_dump)
