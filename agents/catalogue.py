"""The built-in scheduling policies, registered under their names (the ``arena_gym.catalogues`` entry point)."""

from __future__ import annotations

from arena_gym.registry import Entry, policy_registry

#: Name -> entry of every built-in policy.
POLICIES: dict[str, Entry] = {
    "fcfs": Entry("agents.fcfs:FCFS", {}, "first come first served at the requested shape"),
    "fcfs-r": Entry("agents.fcfs:FCFS", {"relax": True}, "FCFS with relaxed locality"),
    "srtf": Entry("agents.srtf:SRTF", {}, "preemptive shortest remaining time first"),
    "arena": Entry("agents.arena:ArenaPolicy", {}, "Arena heuristic (AP proxy estimates)"),
    "arena-dp": Entry(
        "agents.arena:ArenaPolicy", {"dp_only": True}, "Arena deciding with data-parallel-only estimates"
    ),
    "arena-ns": Entry("agents.arena:ArenaPolicy", {"no_scaling": True}, "Arena without GPU-count scaling"),
    "arena-nh": Entry("agents.arena:ArenaPolicy", {"no_type_change": True}, "Arena without GPU-type change"),
    "arena-no": Entry("agents.arena:ArenaPolicy", {"no_opportunism": True}, "Arena without opportunistic backfill"),
    "arena-ddl": Entry("agents.arena:ArenaPolicy", {"deadline_aware": True}, "deadline-aware Arena"),
    "arena-np": Entry("agents.arena:ArenaPolicy", {"pruned": False}, "Arena paying the unpruned AP-search overhead"),
    "tiresias": Entry("agents.tiresias:Tiresias", {}, "2D-LAS (discretised least attained service)"),
    "gandiva": Entry("agents.gandiva:Gandiva", {}, "migration and grow/shrink within one GPU type"),
    "elasticflow-ls": Entry(
        "agents.elasticflow:ElasticFlowLS", {}, "ElasticFlow with loose deadlines (throughput oriented)"
    ),
    "gavel": Entry("agents.gavel:Gavel", {}, "max-sum-throughput MILP over GPU types (HiGHS)"),
    "sia": Entry("agents.sia:Sia", {}, "goodput MILP over GPU type and count (HiGHS)"),
    "arena-gittins": Entry(
        "agents.search.gittins:arena_gittins", {}, "Arena ordered by the belief's Gittins index (non-clairvoyant)"
    ),
    "arena-srpt": Entry(
        "agents.arena.variants:arena_srpt", {}, "Arena ordered by the true shortest remaining time (clairvoyant)"
    ),
    "arena-pl": Entry(
        "agents.search.gittins:arena_gittins",
        {"preempt_lower": True},
        "arena-gittins preempting any lower-index running job for a waiting one",
    ),
    "lookahead": Entry(
        "agents.search.lookahead:Lookahead",
        {},
        "Arena's decision tested against variants by rollouts in sampled worlds",
    ),
    "lookahead-oracle": Entry(
        "agents.search.lookahead:Lookahead", {"oracle": True}, "lookahead on the true world (clairvoyant ablation)"
    ),
}


def register() -> None:
    """Register the built-in policies and the ``sb3:PATH`` prefix (a trained agent)."""
    registry = policy_registry()
    for name, entry in POLICIES.items():
        registry.register(name, entry.target, entry.kwargs, entry.description)
    registry.register_prefix("sb3", "agents.rl.policy:load_sb3_policy")
