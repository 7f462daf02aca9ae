"""The Ray launcher: generations placed across machines by Ray (``pip install -e ".[ray]"``).

Ray contributes process placement and remote start; device accounting stays the controller's
(its device map gives every rank a device slot of the testbed) and resharding stays the
checkpoints' job. Each generation gets one placement group with a bundle per testbed node
(pinned to that node's host when the host is an IP address Ray knows); each rank is a small Ray
actor in its node's bundle that starts ``python -m real_runner.worker`` as a subprocess with the
rank's environment (rendezvous at rank 0's node), pins it (CPU) or sets ``CUDA_VISIBLE_DEVICES``
(GPU), and signals it on request. Bundles reserve only a token of CPU: the controller already
keeps generations from sharing devices, and the next generation must be able to start (held)
while the previous one still saves.

The worker specs, logs, progress channels, release files and checkpoints live under the
deployment's run directory, which must be a path every node can read and write (a shared
filesystem: the testbed's ``checkpoint_root``). Actors and placement groups are detached and
named after the deployment, job, generation and rank, so a restarted controller reattaches to
them (:meth:`RayLauncher.reattach`).
"""

from __future__ import annotations

import logging
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from real_runner.launchers.base import LaunchRequest, release_file
from real_runner.launchers.local import LOCAL_HOSTS, find_processes
from real_runner.ranks import free_port
from real_runner.worker import ready_file

log = logging.getLogger(__name__)

#: CPU a rank's actor (and its bundle share) reserves: a token, see the module docstring.
TOKEN_CPU = 0.001
#: Seconds to wait for a remote call before treating the rank's actor as lost.
CALL_TIMEOUT_S = 30.0


class RankProcess:
    """Runs one rank's worker process on the node Ray placed it on (the body of a Ray actor)."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen | None = None

    def node(self) -> tuple[str, int]:
        """This node's IP address and a free port on it (the rendezvous, when this is rank 0)."""
        import ray  # noqa: PLC0415 - inside the actor

        ip = ray.util.get_node_ip_address()
        return ip, free_port(ip)

    def start(self, cmd: Sequence[str], env: Mapping[str, str], cwd: str | None, log_path: str) -> int:
        """Start the worker (its own session) with this node's environment updated by ``env``; its pid."""
        import os  # noqa: PLC0415 - the node's own environment, inside the actor

        Path(log_path).parent.mkdir(parents=True, exist_ok=True)
        with open(log_path, "ab") as fh:
            self.proc = subprocess.Popen(
                list(cmd),
                env={**os.environ, **env},
                stdout=fh,
                stderr=subprocess.STDOUT,
                cwd=cwd,
                start_new_session=True,
            )
        return self.proc.pid

    def poll(self) -> int | None:
        """The worker's exit code, None while it runs."""
        return None if self.proc is None else self.proc.poll()

    def signal(self, signum: int) -> None:
        """Send a signal to the worker if it runs."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signum)


class RayGeneration:
    """A generation's rank actors and placement group."""

    def __init__(
        self,
        ray: Any,
        actors: Sequence[Any],
        names: Sequence[str],
        pids: Sequence[int],
        group: Any,
        logs: Sequence[Path],
        release: Path,
    ) -> None:
        self._ray, self.actors, self.names, self._pids, self.group = ray, list(actors), list(names), tuple(pids), group
        self.logs, self.release_path = list(logs), release
        self._codes: list[int | None] = [None] * len(self.actors)

    @property
    def pids(self) -> tuple[int, ...]:
        """Worker pids by rank (on their own nodes)."""
        return self._pids

    def poll(self) -> list[int | None]:
        """Exit codes by rank; a rank whose actor is lost counts as exited (0: its records tell)."""
        pending = [r for r, c in enumerate(self._codes) if c is None]
        refs = [self.actors[r].poll.remote() for r in pending]
        for r, ref in zip(pending, refs):
            try:
                self._codes[r] = self._ray.get(ref, timeout=CALL_TIMEOUT_S)
            except (self._ray.exceptions.RayActorError, self._ray.exceptions.GetTimeoutError) as exc:
                log.warning("rank %d actor %s is lost (%s)", r, self.names[r], type(exc).__name__)
                self._codes[r] = 0
        return list(self._codes)

    def held_ready(self) -> bool:
        """True once every held rank waits for its release (ready files on the shared run directory)."""
        return all(ready_file(self.release_path, r).exists() for r in range(len(self.actors)))

    def release(self) -> None:
        """Release the held ranks."""
        self.release_path.touch()

    def _signal(self, ranks: Sequence[int], signum: int) -> None:
        for r in ranks:
            if self._codes[r] is None:
                self.actors[r].signal.remote(signum)

    def terminate(self) -> None:
        """SIGTERM every running rank."""
        self._signal(range(len(self.actors)), signal.SIGTERM)

    def kill(self) -> None:
        """SIGKILL every running rank."""
        self._signal(range(len(self.actors)), signal.SIGKILL)

    def signal_rank(self, rank: int, signum: int) -> None:
        """Send ``signum`` to one rank."""
        self._signal([rank], signum)

    def log_tail(self, rank: int, max_bytes: int = 2000) -> str:
        """The end of a rank's log (shared run directory)."""
        path = self.logs[rank]
        data = path.read_bytes() if path.exists() else b""
        return data[-max_bytes:].decode("utf-8", errors="replace")

    def describe(self) -> dict[str, Any]:
        """Actor names and pids."""
        return {"actors": self.names, "pids": list(self._pids), "logs": [str(p) for p in self.logs]}

    def close(self) -> None:
        """Kill the rank actors and remove the placement group (the workers have exited)."""
        for actor in self.actors:
            try:
                self._ray.kill(actor)
            except Exception as exc:  # noqa: BLE001 - an actor already gone is fine
                log.debug("actor already gone: %s", exc)
        if self.group is not None:
            try:
                self._ray.util.remove_placement_group(self.group)
            except Exception as exc:  # noqa: BLE001 - a group already removed is fine
                log.debug("placement group already removed: %s", exc)


class RayLauncher:
    """Starts generations through Ray: a placement group per generation, an actor per rank.

    ``address`` names a running Ray cluster (``ray start --head`` on one machine, ``ray start
    --address ...`` on the others); without it a local Ray is started with ``num_cpus``
    logical CPUs. ``namespace`` keeps one deployment's actors apart from another's.
    """

    name = "ray"

    def __init__(
        self,
        address: str | None = None,
        namespace: str = "arena-gym",
        num_cpus: int | None = None,
        python: str = sys.executable,
        cwd: str | Path | None = None,
    ) -> None:
        try:
            import ray  # noqa: PLC0415 - an optional extra
        except ImportError:
            raise ValueError('the ray launcher needs Ray: pip install -e ".[ray]"') from None
        self._ray = ray
        self.python, self.cwd, self.namespace = python, None if cwd is None else str(cwd), namespace
        self._owns = not ray.is_initialized()
        if self._owns:
            kwargs: dict[str, Any] = {"namespace": namespace, "include_dashboard": False, "log_to_driver": False}
            if address is None and num_cpus is not None:
                kwargs["num_cpus"] = num_cpus
            ray.init(address=address, **kwargs)
        self._actor = ray.remote(num_cpus=TOKEN_CPU)(RankProcess)
        self._known_ips = {n["NodeManagerAddress"] for n in ray.nodes() if n.get("Alive")}

    def _bundles(self, request: LaunchRequest) -> tuple[list[dict[str, float]], list[int]]:
        """One bundle per testbed node of the request, and each rank's bundle index."""
        nodes: list[int] = []
        for slot in request.ranks:
            if slot.node not in nodes:
                nodes.append(slot.node)
        bundles = []
        for node in nodes:
            host = next(s.host for s in request.ranks if s.node == node)
            bundle = {"CPU": TOKEN_CPU * sum(1 for s in request.ranks if s.node == node)}
            if host in self._known_ips:
                bundle[f"node:{host}"] = 0.001
            bundles.append(bundle)
        return bundles, [nodes.index(s.node) for s in request.ranks]

    def _names(self, request: LaunchRequest) -> list[str]:
        return [f"{self.namespace}/{request.job_id}/gen{request.generation}/rank{r}" for r in range(request.world_size)]

    def launch(self, request: LaunchRequest) -> RayGeneration:
        """Place and start the ranks of ``request`` (held when ``request.hold``)."""
        ray = self._ray
        from ray.util.placement_group import placement_group  # noqa: PLC0415
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy  # noqa: PLC0415

        bundles, index = self._bundles(request)
        group = placement_group(
            bundles,
            strategy="PACK",
            name=f"{self.namespace}/{request.job_id}/gen{request.generation}",
            lifetime="detached",
        )
        ray.get(group.ready(), timeout=120)
        names = self._names(request)
        actors = [
            self._actor.options(
                name=name,
                lifetime="detached",
                scheduling_strategy=PlacementGroupSchedulingStrategy(group, placement_group_bundle_index=index[r]),
            ).remote()
            for r, name in enumerate(names)
        ]
        master, port = ray.get(actors[0].node.remote(), timeout=CALL_TIMEOUT_S)
        request.log_dir.mkdir(parents=True, exist_ok=True)
        release = release_file(request.log_dir)
        for stale in (release, *(ready_file(release, r) for r in range(request.world_size))):
            stale.unlink(missing_ok=True)
        logs = [request.log_dir / f"rank{r}.log" for r in range(request.world_size)]
        starts = []
        for r, slot in enumerate(request.ranks):
            local = [s for s in request.ranks if s.node == slot.node]
            env = {
                **request.env,
                "RANK": str(r),
                "WORLD_SIZE": str(request.world_size),
                "LOCAL_RANK": str(local.index(slot)),
                "LOCAL_WORLD_SIZE": str(len(local)),
                "MASTER_ADDR": master,
                "MASTER_PORT": str(port),
                "OMP_NUM_THREADS": "1",
            }
            cmd = [self.python, "-m", "real_runner.worker", "--spec", str(request.spec_path)]
            if request.cuda:
                env["CUDA_VISIBLE_DEVICES"] = ",".join(str(s.device) for s in local)
            elif slot.pin_core is not None:
                cmd += ["--pin-core", str(slot.pin_core)]
            if request.hold:
                cmd += ["--hold-until", str(release)]
            starts.append(actors[r].start.remote(cmd, env, self.cwd, str(logs[r])))
        pids = ray.get(starts, timeout=CALL_TIMEOUT_S)
        log.info(
            "ray: launched %d ranks of %s (rendezvous %s:%d): pids %s",
            request.world_size,
            request.spec_path,
            master,
            port,
            pids,
        )
        return RayGeneration(ray, actors, names, pids, group, logs, release)

    def reattach(self, request: LaunchRequest, described: Mapping[str, Any]) -> RayGeneration | None:
        """The generation's actors if they are still there, else None (after killing local orphans of it)."""
        ray = self._ray
        actors = []
        for name in self._names(request):
            try:
                actors.append(ray.get_actor(name))
            except ValueError:
                actors = []
                break
        if not actors:
            if all(s.host in LOCAL_HOSTS for s in request.ranks):  # a local Ray died with its controller
                import os  # noqa: PLC0415

                for pid in find_processes(str(request.spec_path)):
                    os.kill(pid, signal.SIGKILL)
            return None
        logs = [Path(p) for p in described.get("logs", [])] or [
            request.log_dir / f"rank{r}.log" for r in range(request.world_size)
        ]
        return RayGeneration(
            ray, actors, self._names(request), described.get("pids", []), None, logs, release_file(request.log_dir)
        )

    def close(self) -> None:
        """Shut down the local Ray this launcher started (not a cluster it connected to)."""
        if self._owns and self._ray.is_initialized():
            self._ray.shutdown()
