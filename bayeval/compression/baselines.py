"""Subset baselines for benchmark compression (docs/methods.md §8): uniform random, stratified
by a category column, and k-means on the items' reference score vectors.

Each returns item indices and the weights that turn the subset's scores into a
full-benchmark estimate (Σ w_j s_j with Σ w_j = 1): equal weights for uniform and k-means
medoids would ignore cluster sizes, so

* uniform: w = 1/k;
* stratified: each category gets round(k · its share) items (largest remainders; at least
  one per category while k allows), weighted by its share over its items;
* k-means: k clusters of the items' score vectors over the reference models (k-means++
  start, Lloyd iterations), the item nearest each centroid, weighted by its cluster's
  share of the items (as anchor-point methods do).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def uniform_subset(rng: np.random.Generator, n_items: int, size: int
                   ) -> tuple[np.ndarray, np.ndarray]:
    """(items, weights): ``size`` items uniformly without replacement."""
    if not 1 <= size <= n_items:
        raise ValueError(f"subset size must be in 1..{n_items}, got {size}")
    return np.sort(rng.choice(n_items, size, replace=False)), np.full(size, 1.0 / size)


def stratified_subset(rng: np.random.Generator, categories: Sequence, size: int
                      ) -> tuple[np.ndarray, np.ndarray]:
    """(items, weights): proportional allocation over ``categories`` (one label per item),
    uniform within each."""
    labels, inverse = np.unique(np.asarray(categories), return_inverse=True)
    L = inverse.size
    if not 1 <= size <= L:
        raise ValueError(f"subset size must be in 1..{L}, got {size}")
    counts = np.bincount(inverse, minlength=labels.size)
    share = counts / L
    quota = np.floor(share * size).astype(int)
    if size >= labels.size:  # every category represented when the size allows
        quota = np.maximum(quota, 1)
    while quota.sum() > size:  # only from the at-least-one rule: trim the largest
        quota[np.argmax(quota - share * size)] -= 1
    remainder = share * size - quota
    for c in np.argsort(-remainder, kind="stable")[: size - quota.sum()]:
        quota[c] += 1
    quota = np.minimum(quota, counts)
    items, weights = [], []
    for c in range(labels.size):
        if quota[c] == 0:
            continue
        members = np.flatnonzero(inverse == c)
        items.append(rng.choice(members, quota[c], replace=False))
        weights.append(np.full(quota[c], share[c] / quota[c]))
    items, weights = np.concatenate(items), np.concatenate(weights)
    order = np.argsort(items)
    return items[order], weights[order] / weights.sum()


def kmeans(points: np.ndarray, k: int, rng: np.random.Generator, iterations: int = 50
           ) -> tuple[np.ndarray, np.ndarray]:
    """(centroids (k, d), labels (n,)) by k-means++ seeding and Lloyd iterations."""
    points = np.asarray(points, dtype=np.float64)
    n = points.shape[0]
    centroids = np.empty((k, points.shape[1]))
    centroids[0] = points[rng.integers(n)]
    closest = np.sum((points - centroids[0]) ** 2, axis=1)
    for c in range(1, k):
        total = closest.sum()
        pick = rng.choice(n, p=closest / total) if total > 0 else rng.integers(n)
        centroids[c] = points[pick]
        closest = np.minimum(closest, np.sum((points - centroids[c]) ** 2, axis=1))
    sq = np.sum(points**2, axis=1)[:, None]
    labels = np.zeros(n, dtype=int)
    for _ in range(iterations):
        dist = sq - 2 * points @ centroids.T + np.sum(centroids**2, axis=1)[None, :]
        new = np.argmin(dist, axis=1)
        if _ > 0 and np.array_equal(new, labels):
            break
        labels = new
        for c in range(k):
            members = labels == c
            if members.any():
                centroids[c] = points[members].mean(axis=0)
    return centroids, labels


def kmeans_subset(rng: np.random.Generator, reference_scores: np.ndarray, size: int
                  ) -> tuple[np.ndarray, np.ndarray]:
    """(items, weights): the item nearest each of ``size`` k-means centroids of the items'
    score vectors over the reference models (``reference_scores``: (models, items)),
    weighted by cluster size."""
    points = np.asarray(reference_scores, dtype=np.float64).T  # (L, models)
    L = points.shape[0]
    if not 1 <= size <= L:
        raise ValueError(f"subset size must be in 1..{L}, got {size}")
    centroids, labels = kmeans(points, size, rng)
    items, weights = [], []
    for c in range(size):
        members = np.flatnonzero(labels == c)
        if members.size == 0:
            continue
        nearest = members[np.argmin(np.sum((points[members] - centroids[c]) ** 2, axis=1))]
        items.append(nearest)
        weights.append(members.size / L)
    items, weights = np.asarray(items), np.asarray(weights)
    order = np.argsort(items)
    return items[order], weights[order] / weights.sum()
