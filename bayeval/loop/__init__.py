"""The ask/tell loop and its simulator.

* :mod:`~bayeval.loop.session` — :class:`Session`, the journaled ask/tell loop of a live
  run (its records: :mod:`~bayeval.loop.session_journal`; the positions of its items:
  :mod:`~bayeval.loop.cells`; rounds applied in draw order: :mod:`~bayeval.loop.draw_order`).
* :mod:`~bayeval.loop.runner` — the host loop: ask, evaluate, tell, one round at a time or
  K evaluations in flight; :mod:`~bayeval.loop.timing` says where its time went.
* :mod:`~bayeval.loop.suite` — several tasks, one budget, the weighted average.
* :mod:`~bayeval.loop.simulate` — the same loop jitted and vmapped over runs.
"""
