"""Search policies: a base policy's decision tested against candidates by rollouts in worlds (:mod:`agents.search.lookahead`).

A non-clairvoyant planner rolls out in worlds sampled from the belief (:mod:`agents.belief`);
the clairvoyant ablation in the true world (:mod:`agents.search.worlds`).
"""
