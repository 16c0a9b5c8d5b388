package jmespath

import (
	"container/list"
	"sync"
)

// lru is a concurrency-safe, size-bounded cache of compiled queries. A
// capacity of zero disables it.
type lru struct {
	mu       sync.Mutex
	capacity int
	order    *list.List // front is most recently used; values are *lruEntry
	items    map[string]*list.Element
}

type lruEntry struct {
	key   string
	query *query
}

func newLRU(capacity int) *lru {
	return &lru{
		capacity: capacity,
		order:    list.New(),
		items:    make(map[string]*list.Element),
	}
}

func (c *lru) get(key string) (*query, bool) {
	if c.capacity == 0 {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.items[key]
	if !ok {
		return nil, false
	}
	c.order.MoveToFront(el)
	entry, ok := el.Value.(*lruEntry)
	if !ok {
		return nil, false
	}
	return entry.query, true
}

func (c *lru) add(key string, q *query) {
	if c.capacity == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[key]; ok {
		c.order.MoveToFront(el)
		return
	}
	c.items[key] = c.order.PushFront(&lruEntry{key: key, query: q})
	for c.order.Len() > c.capacity {
		oldest := c.order.Back()
		c.order.Remove(oldest)
		if entry, ok := oldest.Value.(*lruEntry); ok {
			delete(c.items, entry.key)
		}
	}
}

func (c *lru) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}
