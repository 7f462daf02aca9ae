"""The built-in scheduling policies, registered under their names (the ``arena_gym.catalogues`` entry point)."""

from __future__ import annotations

from typing import Any

from arena_gym.registry import Entry, policy_registry

#: The registered lookahead's config (chosen on the validation and train windows of the real traces, never the test ones: benchmarks/tune_lookahead.py).
LOOKAHEAD: dict[str, Any] = {
    "base": "arena-gittins-32-f",
    "candidates": ("arena-gittins-32", "arena-gittins-32-wf"),
    "worlds": 8,
    "horizon_s": 4 * 3600.0,
    "margin": 0.0,
}

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
    "arena-cap10": Entry(
        "agents.arena:ArenaPolicy",
        {"max_restart_trials": 10},
        "Arena trying at most 10 fits per restart trial (a speed ablation; Arena's own cap is 100)",
    ),
    "tiresias": Entry("agents.tiresias:Tiresias", {}, "2D-LAS (discretised least attained service)"),
    "gandiva": Entry("agents.gandiva:Gandiva", {}, "migration and grow/shrink within one GPU type"),
    "elasticflow-ls": Entry(
        "agents.elasticflow:ElasticFlowLS", {}, "ElasticFlow with loose deadlines (throughput oriented)"
    ),
    "gavel": Entry("agents.gavel:Gavel", {}, "max-sum-throughput MILP over GPU types (HiGHS)"),
    "sia": Entry("agents.sia:Sia", {}, "goodput MILP over GPU type and count (HiGHS)"),
    "arena-gittins": Entry(
        "agents.arena.gittins:arena_gittins", {}, "Arena ordered by the belief's Gittins index (non-clairvoyant)"
    ),
    "arena-srpt": Entry(
        "agents.arena.variants:arena_srpt", {}, "Arena ordered by the true shortest remaining time (clairvoyant)"
    ),
    "arena-pl": Entry(
        "agents.arena.gittins:arena_gittins",
        {"preempt_lower": True},
        "arena-gittins preempting any lower-index running job for a waiting one",
    ),
    "arena-gittins-adapt": Entry(
        "agents.arena.gittins:arena_gittins",
        {"adapt": True},
        "arena-gittins at the episode's inferred work scale, Arena's GPU cap (non-clairvoyant)",
    ),
    "arena-gittins-f": Entry(
        "agents.arena.gittins:arena_gittins",
        {"adapt": True, "weighted_fits": True},
        "arena-gittins-32-f with Arena's GPU cap (16 per job): the cap's share of its gain (non-clairvoyant)",
    ),
    "arena-32": Entry("agents.arena:ArenaPolicy", {"max_job_gpus": 32}, "Arena letting a job hold up to 32 GPUs"),
    "arena-gittins-32": Entry(
        "agents.arena.gittins:arena_gittins",
        {"adapt": True, "max_job_gpus": 32},
        "arena-gittins at the episode's inferred work scale, up to 32 GPUs per job (non-clairvoyant)",
    ),
    "arena-gittins-32-pl": Entry(
        "agents.arena.gittins:arena_gittins",
        {"max_job_gpus": 32, "preempt_lower": True},
        "arena-gittins (the belief's own scale) with 32 GPUs per job, preempting lower-index running jobs",
    ),
    "arena-gittins-32-hold": Entry(
        "agents.arena.gittins:arena_gittins",
        {"max_job_gpus": 32, "max_upgrade_steps": 0},
        "arena-gittins (the belief's own scale) with 32 GPUs per job, never growing running jobs",
    ),
    "arena-gittins-32-w": Entry(
        "agents.arena.gittins:arena_gittins",
        {"adapt": True, "max_job_gpus": 32, "weighted_upgrades": True},
        "arena-gittins-32 growing the jobs with the most expected completions per second gained (non-clairvoyant)",
    ),
    "arena-gittins-32-f": Entry(
        "agents.arena.gittins:arena_gittins",
        {"adapt": True, "max_job_gpus": 32, "weighted_fits": True},
        "arena-gittins-32 shrinking, for a new job, the jobs whose loss costs fewest expected completions (non-clairvoyant)",
    ),
    "arena-gittins-32-wf": Entry(
        "agents.arena.gittins:arena_gittins",
        {"adapt": True, "max_job_gpus": 32, "weighted_upgrades": True, "weighted_fits": True},
        "arena-gittins-32 with urgency-weighted upgrades and downgrades (non-clairvoyant)",
    ),
    "arena-srpt-w": Entry(
        "agents.arena.variants:arena_srpt",
        {"max_job_gpus": 32, "weighted_upgrades": True, "preempt_lower": True},
        "arena-srpt with 32 GPUs, preempting, growing by 1 / remaining work (clairvoyant)",
    ),
    "lookahead": Entry(
        "agents.search.lookahead:Lookahead",
        LOOKAHEAD,
        "arena-gittins-32-f's decision tested against variants by rollouts in sampled worlds (non-clairvoyant)",
    ),
    "lookahead-oracle": Entry(
        "agents.search.lookahead:Lookahead",
        {**LOOKAHEAD, "oracle": True},
        "lookahead on the true world: true lengths and arrivals (clairvoyant ablation)",
    ),
}


def register() -> None:
    """Register the built-in policies and the ``sb3:PATH`` and ``residual:PATH`` prefixes (trained agents)."""
    registry = policy_registry()
    for name, entry in POLICIES.items():
        registry.register(name, entry.target, entry.kwargs, entry.description)
    registry.register_prefix("sb3", "agents.rl.policy:load_sb3_policy", "PATH")
    registry.register_prefix("residual", "agents.residual.priority:load_residual_policy", "PATH")
