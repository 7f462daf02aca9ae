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
#: the adaptive ones from their code before the episode log's fork and the likelihood memo). Arena's
#: cases were re-recorded once for its tie rule (ARENA_VERSION 2: the lowest job id among equally
#: ranked victims and moves), which moves the logs of workloads with ties.
DIGESTS: dict[str, str] = {
    "make-run/arena": "e36c67c85187d80033db097601073eff64e7c0bdb0dca4ace3eeacfba1b12964",
    "make-run/arena-ddl": "9370b9c033d8f3bd1d31eedf2b11547eb66dfc80369ba9d3b6d5e606494ee792",
    "make-run/arena-dp": "c9288e0426d58c4aa187871c5016b3977cbbd708e88107480ebcf68ecd526647",
    "make-run/arena-nh": "d13d25bbb414c1788adb4ade25ff15ed9147ad1bffacb7aa5a66f652f03076ee",
    "make-run/arena-no": "b0a48364e96fb4f649218a9e3c7438b68e7d212dfdf686c4da80db95ecff15d3",
    "make-run/arena-np": "b91e3f38a9a7bf90e23918641cf533ab7ac3e2161fea9a74e7702bda40cbf59f",
    "make-run/arena-ns": "f1fd724d0a9b5923f2c4eafb176faa33a8f453aeae8cb8929cb78474280067a0",
    "make-run/elasticflow-ls": "689ce4f9c26f7d4ce632839e3cf35801e18a189bb9da49da513c7295491e64ea",
    "make-run/fcfs": "66e4dbc231c17be273f2fca81e954bb46bb61195036d3b76751e771b282fd0fe",
    "make-run/fcfs-r": "30a762eb270ecd20b0021ab54f887128e654ea4886217e8dd9216c438c75852a",
    "make-run/gandiva": "0215a1a0aca99500559d7e501803305157761e04985ed4d8abdb23d1031989df",
    "make-run/gavel": "109d88a621c990dfd7ff7e0b22fca2a35fce2ce065bc71a48c17605a5ba0858d",
    "make-run/sia": "f1a927ae90d9088057c2ebaf29aa206febc50b8b4ab89041ca87d9609b8ab397",
    "make-run/srtf": "5302bce7e228908e149029170d07da05caa295cb6de2c9f1aefb6c5bcf7f6de3",
    "make-run/tiresias": "2c3811ecdc27af716824f7775bcc45e72efb450954b924e16a348616fd837f59",
    "make-run/arena-gittins": "3e26f5d7842bceca6acf85ab89c8c107883350a118f1d863790b7c74a26fd2ea",
    "make-run/arena-pl": "334b616fe6ac5c344cd41cbb0fb5e302aa44a1839dcda0c35a17c7386e7506c2",
    "make-run/arena-srpt": "95a01704274ce90fe3a18771795e357dade866fdb7fee2019f1d506bc7a116fd",
    "overloaded/arena": "14435f5647e6a4b9e6bd93d0812a4f4254c1184de5d960dc9ecbfaee2ce6ff9a",
    "overloaded/arena-ddl": "9e4d9f45fa9ce3fa94e5bfb045dd1c5b8a5c1935aa4f461a9c3d1cffff3c1617",
    "overloaded/arena-dp": "60247390560df292482c55ff801143cd6043214374e503312e5cd2480aaeedde",
    "overloaded/arena-nh": "135386c3276c4d5260a5377d744c97c8dc8e88abf45549fee5de4bafbb86ba9b",
    "overloaded/arena-no": "dbd89c3f52785035e84ef126ad06730240f595983998f0c1174b9a682c9e7a50",
    "overloaded/arena-np": "3502f5259d237ef299e507b361546d23f0ae400e60b06bb988ea1ce67e1a2c60",
    "overloaded/arena-ns": "dd19aafc33cf7af7a3b331dd5561b35ce2779c43097ef28cffcc887ad3978c65",
    "overloaded/arena-gittins": "644c92c695165badd60e75bbc1f22e2aa2ab01e3730b764d686ed2c5fff9f8fc",
    "overloaded/arena-pl": "6db7b9874b75169ce6ad31d76beb26a2c01ab12c1dd4ada49068f1962ee9c34c",
    "overloaded/arena-srpt": "1063f98488f148c80d4007b4f19a6bdbcfdb196c3572fe80282d296e12936b69",
    "testbed/arena": "e3d12e27814ed0e73dd93eaf9a53c078ae2de54f58d103ce1bcc3075dd73169b",
    "testbed/arena-ddl": "f20d5632a00e6965adea75ccb571a5a9de8cf9d961b85e110dcb88da04684134",
    "testbed/arena-dp": "4a7869e4e166048348964db9fb7d507043fdfb24bf7b3e48378ba295eeb8a09a",
    "testbed/arena-nh": "94648a1cd9f67852229826587d6b02abc4f468ff532c4f3ed417e99187b1f854",
    "testbed/arena-no": "0cbbb0ea0659a87812a8eac214929ca793bb2ffb6619c5fc2cb15df69c3b935b",
    "testbed/arena-np": "7bbbb1f9c29f34b9998a16379bb03b1a18fdb57150c2bf48a505440dac2b08ef",
    "testbed/arena-ns": "73e01b3dad6aba1e4ebf063101f892417512ad988d547dc7ed2640bc476a1eb5",
    "testbed/elasticflow-ls": "2f4731c42a7f3a31e1062fe4d1df4afbee0bc2c31f9e38ae0432062874806b8c",
    "testbed/fcfs": "6604111301a970725f59d9a494bfd7e204c274c4bbf8e742f04e07c18fbc9837",
    "testbed/fcfs-r": "3cf1310147cb4f41c066f3dc06a82b615bb71af91be3de357fa7ed38c369ddb9",
    "testbed/gandiva": "a777aa49bbd3ad2d9b2bd71c28be9f0ac9b59476525accabcf16d2d47c3fdd09",
    "testbed/gavel": "f992b8dd7abd6c9eaef76e5fab1ac2fbdef4fe8407f7dca616fa3683e764d997",
    "testbed/sia": "eaabcbd2de100483680ad1ffd90c9461121f88a0de92cbdef80521938331acae",
    "testbed/srtf": "18b5876659fb540bfdbee5184d9d7cb8dca2786e5b9a8078ffe4ea51a2945146",
    "testbed/tiresias": "c4ed83f4d82fe2f7101a9e13d7768541e9ec5ebc7876995563dea8e9de1fdb33",
    "testbed/arena-gittins": "2200fe222c15a4a592802a244bb6246e6c20dfb1d19accd5b9a0f693ad214e73",
    "testbed/arena-pl": "32778562daec11a7a3c356da6a6779fc1186c471ecf24e298afb3b9829be8a60",
    "testbed/arena-srpt": "c0fda6573b2f73f71619ecd73e7447b127ec28cd537c7280d67c2daebd3e4fce",
    "philly-round300/arena": "98f2a3a470c0aac5f86e3679d4716e4f99650a9d5e98aab9b3887afc5b147ee9",
    "philly-event/arena": "8229a529081854cae781735d2e638654c516cb595c0ee3585750f9e21ed87e00",
    "real-test/arena": "68e32b47638ab27705e66fc5a2e6e07cef5486b626f2db319c036f81463f0c60",
    "real-test/arena-ddl": "deb82392bf169248958690984f25b246e3f5fd34fad7049df8e4e14553530147",
    "real-test/arena-dp": "cfd9692f1697eb3117c4fd39502baec260713b5aeebf22fb24214d9796fba860",
    "real-test/arena-nh": "4fa8ad031e779ed0894fe8c536a744ba05989f95f03107e806e4f5c49ba1e2f3",
    "real-test/arena-no": "91234a90555aa9bfec99ca234c9044c4c86bb4a9dc505a5c4feb0763af3c8679",
    "real-test/arena-np": "766bc8566863a3612b654f88a8ae65f562f27d4ae55da55e8ad09fcddaf64e97",
    "real-test/arena-ns": "24ab4efae8a0de0d4d4976bafd51fcc75219603c9357e36ce0b6ff01e113c66b",
    "real-test/elasticflow-ls": "6c267ff9b822f9e6b2c7ca77451462a452acaec26663e74ed657e7f71f813e0e",
    "real-test/fcfs": "b5881075299e9f4faa56923c30b03a78f7b2dd5037aa4f58b70df7bf89ce30a3",
    "real-test/fcfs-r": "a79c1482c88f7a7da0838d143dcde071e7a5a75549a26ae52be67c9dfc5c4493",
    "real-test/gandiva": "caa5fa18571d74ab415da31c02c158b8d0f4820393e2ba7450fd1fcea880df74",
    "real-test/gavel": "39c0c73e4cc375e3674d07d24f7b8d6b89e7bfc3315f69465fe338d448300ae4",
    "real-test/sia": "422a6905aa31c747d57c34335cadf802a5ed748c1c9e8f387801b3897e1ea413",
    "real-test/srtf": "088d8d3b0de9b5c3d4c204895831df0c5fe5d9863c10a4305d48c52aa7c0671b",
    "real-test/tiresias": "639dc98e4d90c59bccbbfa7ca30391bc1a63c4d768558ca0d0446dae47a69f5b",
    "real-test/arena-gittins": "0647ffcd6341d6798318008f40bfc0d6fb654ea535a5fee49027c5600d8d205b",
    "real-test/arena-pl": "5bed6e2da499a2bc7c50644f6600c9cbe618fb31077d7cbc796d1ac0c430d579",
    "real-test/arena-srpt": "580a80824ebb280a488b8dacfd5c5c82c074d3fb0a9508a9dfc5f1f712aae5e5",
    "make-run/arena-gittins-32": "283dff78f8e54cc4836f37215398ae52966aa2adff4a30da92f3eec17f9c9818",
    "make-run/arena-gittins-32-f": "b8441b23a8bcba533d6b011784d524c00074d65b75fc63b6501dac525a25c0cb",
    "real-test/arena-gittins-32": "230c254e612a667ada51a7a55014e312197d42e4aac47954cef3ce69ffa24b66",
    "real-test/arena-gittins-32-f": "51f5ce3839cf7744ed268a8a174fad69085feecac87deb4f6b9b66e99b4ae388",
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
