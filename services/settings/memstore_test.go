package settings

import (
	"context"
	"sync"
)

// MemoryStore is an in-memory Store for tests; it counts saves and can be made to fail.
type MemoryStore struct {
	mu       sync.Mutex
	values   map[string]string
	revision int64
	saves    int
	getErr   error
	saveErr  error
}

var _ Store = (*MemoryStore)(nil)

func NewMemoryStore() *MemoryStore { return &MemoryStore{values: map[string]string{}} }

func (m *MemoryStore) GetValue(_ context.Context, key string) (string, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.getErr != nil {
		return "", false, m.getErr
	}
	v, ok := m.values[key]
	return v, ok, nil
}

func (m *MemoryStore) SaveRevision(_ context.Context, key, value string) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.saveErr != nil {
		return 0, m.saveErr
	}
	m.values[key] = value
	m.revision++
	m.saves++
	return m.revision, nil
}

func (m *MemoryStore) snapshot() (string, int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.values[StoreKey], m.saves
}
