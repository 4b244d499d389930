"""Interrupts held back during a trial's state change are delivered on leaving the block."""
import os
import signal

import pytest

from autofuse.search.interrupts import deferred_interrupts


@pytest.fixture
def ctrl_c():
    """Python's own SIGINT handler for the test (a shell starts background jobs with SIGINT ignored)."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, before)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_held_then_delivered_once(signum, ctrl_c):
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


def test_nothing_delivered_without_a_signal(ctrl_c):
    with deferred_interrupts():
        pass
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler



@pytest.mark.parametrize("where, state", [("ask", "FAIL"), ("tell", "COMPLETE")])
def test_a_signal_during_ask_or_tell_leaves_no_trial_running(where, state):
    """The held signal is delivered just after ask made the trial RUNNING (that trial ends FAIL) or
    just after tell finished it (it stays COMPLETE); the search stops either way."""
    import optuna

    from autofuse.search.graph_tuner import _ask_tell
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study()
    call = getattr(study, where)

    def then_signal(*a, **k):
        out = call(*a, **k)
        os.kill(os.getpid(), signal.SIGTERM)   # lands inside the deferred block
        return out
    setattr(study, where, then_signal)
    called = []
    before = signal.signal(signal.SIGTERM, lambda s, f: (_ for _ in ()).throw(KeyboardInterrupt()))
    try:
        with pytest.raises(KeyboardInterrupt):
            _ask_tell(study, lambda t: called.append(t) or 1.0, 3, None)
    finally:
        signal.signal(signal.SIGTERM, before)
    assert len(called) == (where == "tell")
    assert [t.state.name for t in study.get_trials(deepcopy=False)] == [state]


def test_an_interrupt_whose_raise_is_swallowed_still_stops_the_search():
    """The SIGTERM handler's KeyboardInterrupt can land where Python ignores exceptions (a weakref
    callback): the request it recorded ends the search at the next trial all the same."""
    import optuna

    from autofuse.search.graph_tuner import _ask_tell
    from autofuse.search.interrupts import clear_stop, interrupt, stop_requested
    clear_stop()
    study = optuna.create_study()
    calls = []

    def objective(trial):
        calls.append(trial.number)
        if len(calls) == 2:
            try:
                interrupt(15, None)
            except KeyboardInterrupt:
                pass   # swallowed, as in a weakref callback
        return float(trial.number)
    try:
        with pytest.raises(KeyboardInterrupt):
            _ask_tell(study, objective, 10, None)
        assert stop_requested() and calls == [0, 1]
        assert [t.state.name for t in study.trials] == ["COMPLETE", "COMPLETE"]
    finally:
        clear_stop()
