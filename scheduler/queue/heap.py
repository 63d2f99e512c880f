"""A binary heap keyed by item, with update and delete (kube-scheduler's backend/heap).

``less(a, b)`` orders items; ``key(item)`` identifies them. Add, update, delete and pop are
O(log n), get and contains O(1).
"""

from __future__ import annotations

from typing import Callable, Generic, Iterator, TypeVar

T = TypeVar("T")


class KeyedHeap(Generic[T]):
    def __init__(self, key: Callable[[T], str], less: Callable[[T, T], bool]):
        self._key = key
        self._less = less
        self._items: list[T] = []
        self._pos: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: str) -> bool:
        return key in self._pos

    def __iter__(self) -> Iterator[T]:
        return iter(list(self._items))

    def get(self, key: str) -> T | None:
        i = self._pos.get(key)
        return None if i is None else self._items[i]

    def peek(self) -> T | None:
        return self._items[0] if self._items else None

    def add_or_update(self, item: T) -> None:
        k = self._key(item)
        i = self._pos.get(k)
        if i is None:
            self._items.append(item)
            self._pos[k] = len(self._items) - 1
            self._up(len(self._items) - 1)
        else:
            self._items[i] = item
            self._fix(i)

    def delete(self, key: str) -> T | None:
        i = self._pos.pop(key, None)
        if i is None:
            return None
        item = self._items[i]
        last = self._items.pop()
        if i < len(self._items):
            self._items[i] = last
            self._pos[self._key(last)] = i
            self._fix(i)
        return item

    def pop(self) -> T | None:
        if not self._items:
            return None
        return self.delete(self._key(self._items[0]))

    def _fix(self, i: int) -> None:
        if not self._down(i):
            self._up(i)

    def _swap(self, i: int, j: int) -> None:
        items = self._items
        items[i], items[j] = items[j], items[i]
        self._pos[self._key(items[i])] = i
        self._pos[self._key(items[j])] = j

    def _up(self, i: int) -> None:
        items, less = self._items, self._less
        while i > 0:
            parent = (i - 1) // 2
            if not less(items[i], items[parent]):
                break
            self._swap(i, parent)
            i = parent

    def _down(self, i0: int) -> bool:
        items, less, n = self._items, self._less, len(self._items)
        i = i0
        while True:
            left = 2 * i + 1
            if left >= n:
                break
            j = left
            right = left + 1
            if right < n and less(items[right], items[left]):
                j = right
            if not less(items[j], items[i]):
                break
            self._swap(i, j)
            i = j
        return i > i0
