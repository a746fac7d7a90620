"""Agentic episodes with local models: a ReAct loop (:mod:`.loop`), local tools (:mod:`.tools`), task sets
(:mod:`.tasksets`) and the collector that turns episodes into a routing table (:mod:`.collect`).

``routerlab collect --agent TASKSET`` runs it; docs/agentic.md ("Collecting episodes") describes it.
"""
