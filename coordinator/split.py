"""How the top level splits a mission's tasks over regions: whole dependency components, sized by idle capacity."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from swarmlog.coordinator.announcements import Announcement
from swarmlog.schemas.records import TaskSpec


def components(tasks: Sequence[TaskSpec]) -> list[list[str]]:
    """The tasks' ids grouped by the connected components of depends_on (a task and everything it is linked to), each
    in the mission's order, the groups ordered by their first task."""
    parent = {task.task_id: task.task_id for task in tasks}

    def root(task_id: str) -> str:
        while parent[task_id] != task_id:
            parent[task_id] = parent[parent[task_id]]
            task_id = parent[task_id]
        return task_id

    for task in tasks:
        for dependency in task.depends_on:
            parent[root(dependency)] = root(task.task_id)
    groups: dict[str, list[str]] = {}
    for task in tasks:
        groups.setdefault(root(task.task_id), []).append(task.task_id)
    return list(groups.values())


def capacity(served: Mapping[str, Announcement]) -> dict[str, int]:
    """The weight of each served region, by name: its idle agents; its alive agents where no region has an idle one;
    1 each where none has any (a mission is placed somewhere all the same). Regions weighing 0 get no share."""
    for figure in ("idle_agents", "agents"):
        weights = {region: getattr(served[region], figure) for region in sorted(served)}
        if any(weights.values()):
            return weights
    return dict.fromkeys(sorted(served), 1)


def split(tasks: Sequence[TaskSpec], weights: Mapping[str, int]) -> list[tuple[str, list[str]]]:
    """(region, task ids) per region that gets any task, by region name: each dependency component goes whole to the
    region furthest below its fair part (tasks x weight / total weight), largest components first, ties to the first
    region by name. Task ids keep the mission's order."""
    regions = sorted(region for region, weight in weights.items() if weight > 0)
    total, scale = len(tasks), sum(weights[region] for region in regions)
    placed: dict[str, list[str]] = {region: [] for region in regions}
    for group in sorted(components(tasks), key=len, reverse=True):  # stable: equal sizes keep the mission's order
        region = max(regions, key=lambda r: (total * weights[r] / scale - len(placed[r]), -regions.index(r)))
        placed[region].extend(group)
    order = {task.task_id: index for index, task in enumerate(tasks)}
    return [(region, sorted(ids, key=order.__getitem__)) for region, ids in placed.items() if ids]


def best(served: Mapping[str, Announcement], exclude: str = "") -> str | None:
    """The served region (other than `exclude`) with the most idle agents, then the fewest active missions, then the
    first by name; None when there is none."""
    regions = sorted(region for region in served if region != exclude)
    if not regions:
        return None
    return min(regions, key=lambda r: (-served[r].idle_agents, served[r].active_missions, r))
