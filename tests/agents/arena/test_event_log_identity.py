"""Arena, and every policy built on agents.common, reproduces fixed event logs exactly (a SHA-256 per run).

Each case runs one policy on one workload the way the CLI does (``arena-gym compare``: one
ground-truth model per cluster, the trace loaded once; ``arena-gym evaluate``: the
:class:`arena_gym.harness.scoring.Evaluator` of the suite) and hashes every field of every event
(floats by ``float.hex``), plus the number of decisions. A digest that moves means some
decision changed: speed work on the policies must leave them all as they are.

To record digests after an intended change of behaviour, run this module with
``ARENA_GYM_PRINT_DIGESTS=1 pytest -s`` and paste the printed table into ``DIGESTS``.
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import os
from functools import cache
from pathlib import Path

import pytest

from arena_gym.cluster import load_cluster
from arena_gym.harness.cli.common import DEFAULT_TRACE
from arena_gym.harness.experiment import RunConfig, load_jobs, run
from arena_gym.harness.scoring import Evaluator, baseline_policies
from arena_gym.harness.suites import get_suite
from arena_gym.loop import run_episode
from arena_gym.records import EpisodeRecord, Event
from arena_gym.registry import make_perf
from arena_gym.scenario import build_scenario
from arena_gym.types import JobSpec, PerfModel

#: The registered policies whose code lives in agents/ (all of them build on agents.common).
POLICIES = (
    "arena",
    "arena-ddl",
    "arena-dp",
    "arena-gittins",
    "arena-nh",
    "arena-no",
    "arena-np",
    "arena-ns",
    "arena-pl",
    "arena-srpt",
    "elasticflow-ls",
    "fcfs",
    "fcfs-r",
    "gandiva",
    "gavel",
    "sia",
    "srtf",
    "tiresias",
)
#: The Gittins orders at the episode's inferred work scale (agents.belief.adaptive: a posterior per decision).
ADAPTIVE = ("arena-gittins-32", "arena-gittins-32-f")
#: The Arena variants (one policy class, the artifact's ablations).
ARENA_VARIANTS = tuple(p for p in POLICIES if p.startswith("arena"))
#: An overloaded synthetic workload on arena-1280 (the queue grows to hundreds of jobs): the
#: pending restart trial stops at its trial budget and passes over failed configurations.
OVERLOADED = "synthetic:n_jobs=1000,rate_per_h=200"
PHILLY = "arena/traces/philly.csv"
TESTBED = "arena/traces/testbed.csv"
#: Windows of the real-test suite, evenly spaced as ``arena-gym evaluate --limit 5`` picks them.
WINDOWS = 5

#: case id -> SHA-256 of the event log, recorded from the code before any speed work (the queue-order
#: variants arena-gittins, arena-pl and arena-srpt, which came later, from their code before it met it;
#: the adaptive ones from their code before the episode log's fork and the likelihood memo).
DIGESTS: dict[str, str] = {
    "make-run/arena": "c1bb005c815d589626a96d78bc2271be57b7a69ab0586a503b476e2a909bdcc9",
    "make-run/arena-ddl": "d460e713045aae449fd6af15b3b91892476463557b25bca96bd26ca2caa5c5e0",
    "make-run/arena-dp": "a2e43636026c255bb7c3bb54aa0540005e80921f6aaa5a12522c26926ba514fc",
    "make-run/arena-nh": "22edc847ba522490a311006a592e2f8db77f3b37276fcba6ed832406f2d520d7",
    "make-run/arena-no": "a68b76d43e2b3122c32fc859d44d966a40a55eb9f794e02d49d2d84114bf4804",
    "make-run/arena-np": "5b72e5283e70b71e5625c9abcf184f6a1e35961f9b3ed19a550cecb588f32549",
    "make-run/arena-ns": "f1fd724d0a9b5923f2c4eafb176faa33a8f453aeae8cb8929cb78474280067a0",
    "make-run/elasticflow-ls": "689ce4f9c26f7d4ce632839e3cf35801e18a189bb9da49da513c7295491e64ea",
    "make-run/fcfs": "66e4dbc231c17be273f2fca81e954bb46bb61195036d3b76751e771b282fd0fe",
    "make-run/fcfs-r": "30a762eb270ecd20b0021ab54f887128e654ea4886217e8dd9216c438c75852a",
    "make-run/gandiva": "0215a1a0aca99500559d7e501803305157761e04985ed4d8abdb23d1031989df",
    "make-run/gavel": "109d88a621c990dfd7ff7e0b22fca2a35fce2ce065bc71a48c17605a5ba0858d",
    "make-run/sia": "f1a927ae90d9088057c2ebaf29aa206febc50b8b4ab89041ca87d9609b8ab397",
    "make-run/srtf": "5302bce7e228908e149029170d07da05caa295cb6de2c9f1aefb6c5bcf7f6de3",
    "make-run/tiresias": "2c3811ecdc27af716824f7775bcc45e72efb450954b924e16a348616fd837f59",
    "make-run/arena-gittins": "a8ffc0a728fd7781dd326bc8d281eb432c28082ee570311331774b909f41143f",
    "make-run/arena-pl": "1dd132c1e7c3510dcb3f3af967a274103f3c35856f65160837712e60cba1c839",
    "make-run/arena-srpt": "d839571a282063f35f5b6ed51c60eb9c81e7705f8228c9db9ed1944c3b46fcb1",
    "overloaded/arena": "fc73397eee92b62ef60dc23322e86046e1026a5f485699a9dd6e3ccddc0d6ee7",
    "overloaded/arena-ddl": "6c869938391d25708a45c069520e0921192ba6a080d038f22682773adf188f04",
    "overloaded/arena-dp": "dee195e2e9559b826b6bfc7823e6330605c136c33b083d2a4418bc1d65f448e0",
    "overloaded/arena-nh": "3047020358d5a3ee791771ba68c848ab1f2e7a96fe3c06e7f98be41edd8db446",
    "overloaded/arena-no": "baf8850ea9457353bae59f779b8a3b87e2c05aa264232ef3713b7fd8f39978ff",
    "overloaded/arena-np": "4b844a6a25c9e769068df7c5d91488a36ddb982c5895bdd00a361c1dd07a98ce",
    "overloaded/arena-ns": "553f5411d7d2e8de32b7200d1197316e7d588f8eb6ed23f6af4dc2583f38cfb9",
    "overloaded/arena-gittins": "c27a051762b6ef4bebbfffba4f3444743d4c06d7e2c1c0187d086a69942f5808",
    "overloaded/arena-pl": "42e98163f33aaac0fb611b38a1fd6046f50881108c2bd3313b2aa6dfea81f923",
    "overloaded/arena-srpt": "e8f1e407a34aa9f2dbffa41f9450589746abf6566838848c0853e9666210059b",
    "testbed/arena": "ff6510fde12dd22e86262af8603b92bded04f7ecc8358a8d0df84dbb57d1c37c",
    "testbed/arena-ddl": "1a30baa82134ee7f1e84e1a2a19c504a0336b34c620ba3603b9d377a965b7d65",
    "testbed/arena-dp": "e75eb9cdf6e8a88c726b66751ffe5b822a6670533d446650a25a4ed42ef530b2",
    "testbed/arena-nh": "12255710222b97e10dc278efc49bd32e8cf3f5e9f4dd7df92ac191e22ccf9f1b",
    "testbed/arena-no": "a58bf945e3394b40b1e286febc7c4c455ab8385e50cdc5f6a5efad32dd79d11f",
    "testbed/arena-np": "a5adbde77e6c6de05bc1234af4190d10a77fedd87f2418ef61c2c8df51d3321c",
    "testbed/arena-ns": "d8fe5a68d1f407eda79c8359655d9dbc05bd1e58244b6ac5b0fc2c1ce5996207",
    "testbed/elasticflow-ls": "2f4731c42a7f3a31e1062fe4d1df4afbee0bc2c31f9e38ae0432062874806b8c",
    "testbed/fcfs": "6604111301a970725f59d9a494bfd7e204c274c4bbf8e742f04e07c18fbc9837",
    "testbed/fcfs-r": "3cf1310147cb4f41c066f3dc06a82b615bb71af91be3de357fa7ed38c369ddb9",
    "testbed/gandiva": "a777aa49bbd3ad2d9b2bd71c28be9f0ac9b59476525accabcf16d2d47c3fdd09",
    "testbed/gavel": "f992b8dd7abd6c9eaef76e5fab1ac2fbdef4fe8407f7dca616fa3683e764d997",
    "testbed/sia": "eaabcbd2de100483680ad1ffd90c9461121f88a0de92cbdef80521938331acae",
    "testbed/srtf": "18b5876659fb540bfdbee5184d9d7cb8dca2786e5b9a8078ffe4ea51a2945146",
    "testbed/tiresias": "c4ed83f4d82fe2f7101a9e13d7768541e9ec5ebc7876995563dea8e9de1fdb33",
    "testbed/arena-gittins": "78676241a6943213f8a781937c2c47a4307e08de893401015c817926179aefb0",
    "testbed/arena-pl": "0cd7663fc94e7c3cedb8060c961d7ba42a0bcc781474b03a013c4eb5de50f7f5",
    "testbed/arena-srpt": "58a55d799f822dc89ec7e2a3956689ebfefc808fc5b82358121d3343b2f9a618",
    "philly-round300/arena": "e8f05ba3ab1146973e26c651105595306a4d0401fdc09128a4262628d6b6bc21",
    "philly-event/arena": "3f7853113dd863ef94cbd9c2ef4be6d8d15873606bdfe8fbd9e86f1cd5e9c6c6",
    "real-test/arena": "712965e3c3f09ce44b665e27c30ff503b45dce53b4ef84fae07530b568cf2a8c",
    "real-test/arena-ddl": "23751ed9b5acba22a76df1a7ab61b31f42218105b66459babd085ce6f972ad5e",
    "real-test/arena-dp": "975a7757a0475fac01278c6dee0543110a11dffedf5ebde47da90c71eddfd351",
    "real-test/arena-nh": "3f7037a1e2c9e0db200e4b3a76fb220a2a43630eb673155116e4f8324382e343",
    "real-test/arena-no": "3d91f9d38999e79ad92805ca97c71b0983fc75914add173dae958a68192b9b6d",
    "real-test/arena-np": "7e1fd83e349d1a34805bf8d37572c672829d69c335b5abe094006d2603ff9e2d",
    "real-test/arena-ns": "15807bad7a99955f36d53cf01958421a15285e9fc2c5df7ee2b2c609a4252ece",
    "real-test/elasticflow-ls": "6c267ff9b822f9e6b2c7ca77451462a452acaec26663e74ed657e7f71f813e0e",
    "real-test/fcfs": "b5881075299e9f4faa56923c30b03a78f7b2dd5037aa4f58b70df7bf89ce30a3",
    "real-test/fcfs-r": "a79c1482c88f7a7da0838d143dcde071e7a5a75549a26ae52be67c9dfc5c4493",
    "real-test/gandiva": "caa5fa18571d74ab415da31c02c158b8d0f4820393e2ba7450fd1fcea880df74",
    "real-test/gavel": "39c0c73e4cc375e3674d07d24f7b8d6b89e7bfc3315f69465fe338d448300ae4",
    "real-test/sia": "422a6905aa31c747d57c34335cadf802a5ed748c1c9e8f387801b3897e1ea413",
    "real-test/srtf": "088d8d3b0de9b5c3d4c204895831df0c5fe5d9863c10a4305d48c52aa7c0671b",
    "real-test/tiresias": "639dc98e4d90c59bccbbfa7ca30391bc1a63c4d768558ca0d0446dae47a69f5b",
    "real-test/arena-gittins": "05337e328b051f892cbe59ceaddf53b67267f5bcdee6da121ff18750548ab8b2",
    "real-test/arena-pl": "919316bb2d1fa159f3cc92ab6670deb0754071f222b679a7e25230b75debf93f",
    "real-test/arena-srpt": "9ed6a03d0b6df158f447ba29953b9fce3a10648ce89ede80a8048ace8e874a02",
    "make-run/arena-gittins-32": "40ca48d84c0d4f46b79ce53ff2cd356cd456e1d23e936249812051286ad44bc6",
    "make-run/arena-gittins-32-f": "425aac23d97ed74548b1817e770210da2659f6a0c6423c3638656fedb6cb4d5b",
    "real-test/arena-gittins-32": "45fd1e7a148deebce8c79f9d6170c87954051e39e448a03de23a6277ebc68b2a",
    "real-test/arena-gittins-32-f": "b0f1518eca4e2cca570523370c3f65e6de2a9ca889afaa0bb1d957c1cd69ffbc",
}


def _field(value: object) -> str:
    if isinstance(value, float):
        return value.hex()
    if isinstance(value, enum.Enum):
        return repr(value.value)
    return repr(value)


def event_log_digest(records: list[EpisodeRecord]) -> str:
    """SHA-256 over every field of every event of ``records`` (and each record's decision count)."""
    names = [f.name for f in dataclasses.fields(Event)]
    digest = hashlib.sha256()
    for record in records:
        digest.update(f"record {record.policy} decisions={record.decisions}\n".encode())
        for event in record.events:
            digest.update(("|".join(_field(getattr(event, n)) for n in names) + "\n").encode())
    return digest.hexdigest()


def check(case: str, records: list[EpisodeRecord]) -> None:
    """Compare the digest of ``records`` with the stored one (or print it when recording)."""
    digest = event_log_digest(records)
    if os.environ.get("ARENA_GYM_PRINT_DIGESTS"):
        print(f'    "{case}": "{digest}",')
    assert digest == DIGESTS.get(case), f"{case}: the event log changed"


@cache
def _truth(cluster: str) -> PerfModel:
    return make_perf("estimator", load_cluster(cluster))


@cache
def _jobs(trace: str, cluster: str) -> tuple[JobSpec, ...]:
    return load_jobs(trace, load_cluster(cluster), _truth(cluster), 0)


def compare_run(policy: str, trace: str, cluster: str, round_s: float | None = None) -> EpisodeRecord:
    """One run as ``arena-gym compare`` makes it (seed 0, the estimator as truth and belief)."""
    config = RunConfig(policy=policy, trace=trace, cluster=cluster, round_s=round_s)
    scenario = build_scenario(cluster, truth=_truth(cluster), sim=config.sim_config())
    return run(config, jobs=_jobs(trace, cluster), scenario=scenario).record


@pytest.mark.parametrize("policy", POLICIES + ADAPTIVE)
def test_make_run_workload(policy):
    check(f"make-run/{policy}", [compare_run(policy, DEFAULT_TRACE, "testbed-64")])


@pytest.mark.parametrize("policy", ARENA_VARIANTS)
def test_overloaded_arena_1280(policy):
    check(f"overloaded/{policy}", [compare_run(policy, OVERLOADED, "arena-1280")])


@pytest.mark.parametrize("policy", POLICIES)
def test_testbed_trace(policy, shared_data: Path):
    check(f"testbed/{policy}", [compare_run(policy, str(shared_data / TESTBED), "testbed-64")])


@pytest.mark.parametrize("round_s", [300.0, None], ids=["round300", "event"])
def test_philly_arena(round_s, shared_data: Path):
    mode = "event" if round_s is None else "round300"
    check(f"philly-{mode}/arena", [compare_run("arena", str(shared_data / PHILLY), "arena-1280", round_s)])


@pytest.fixture(scope="module")
def real_test(shared_data: Path) -> Evaluator:
    """The evaluator of five evenly spaced windows of the real-test suite, as ``arena-gym evaluate`` builds it."""
    suite = get_suite("real-test", str(shared_data))
    workloads = suite.workloads()
    step = len(workloads) / WINDOWS
    return Evaluator(suite.parts[0].config, [workloads[int(i * step)] for i in range(WINDOWS)])


@pytest.mark.parametrize("policy", POLICIES + ADAPTIVE)
def test_real_test_windows(policy, real_test: Evaluator):
    (agent,) = baseline_policies([policy]).values()
    records = [run_episode(real_test.backend(w, agent.ap_search), agent, w.jobs) for w in real_test.workloads]
    check(f"real-test/{policy}", records)
