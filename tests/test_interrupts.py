"""Interrupts held back during a trial's state change are delivered on leaving the block."""
import os
import signal

import pytest

from autofuse.search.interrupts import deferred_interrupts


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_held_then_delivered_once(signum):
    seen = []
    before = signal.signal(signal.SIGTERM, lambda s, f: (_ for _ in ()).throw(KeyboardInterrupt()))
    try:
        with pytest.raises(KeyboardInterrupt):
            with deferred_interrupts():
                os.kill(os.getpid(), signum)
                os.kill(os.getpid(), signum)
                seen.append("the block finished")   # not cut short by the signal
        assert seen == ["the block finished"]
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGTERM, before)


def test_nothing_delivered_without_a_signal():
    with deferred_interrupts():
        pass
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
