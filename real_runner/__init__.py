"""Live execution: the torch training job that runs any AP plan and resumes under another.

``python -m real_runner.worker --spec FILE`` runs one rank of a job (:mod:`real_runner.spec`) under
an estimator plan (:mod:`real_runner.plans`, :mod:`real_runner.executor`), reports progress as JSON
lines (:mod:`real_runner.progress`) and checkpoints with DCP so that any plan can resume it
(:mod:`real_runner.checkpoint`); :mod:`real_runner.ranks` starts the ranks on this machine.
torch is imported only by the modules that train (never by this package's import). See
``docs/real_runner.md``.
"""
