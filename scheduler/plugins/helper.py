"""What several in-tree score plugins share (kube-scheduler's framework/plugins/helper).

- ``default_normalize_score``: DefaultNormalizeScore, which scales raw scores from
  [0, max(scores)] to [0, max_priority] in place, optionally reversed (a high raw count is bad:
  TaintToleration counts intolerable PreferNoSchedule taints; NodeAffinity sums the weights of
  the preferred terms a node matches and is not reversed).
"""

from __future__ import annotations


def default_normalize_score(max_priority: int, reverse: bool, scores: list[int]) -> None:
    """Scale ``scores`` (non-negative integers) in place so the highest becomes ``max_priority``.

    With ``reverse`` each score becomes ``max_priority - scaled``. When every score is 0 they stay
    0, or all become ``max_priority`` when reversed (no node is worse than another). Division
    truncates, as Go's int64 division does for these non-negative values.
    """
    highest = max(scores, default=0)
    if highest == 0:
        if reverse:
            for i in range(len(scores)):
                scores[i] = max_priority
        return
    for i, score in enumerate(scores):
        scaled = max_priority * score // highest
        scores[i] = max_priority - scaled if reverse else scaled
