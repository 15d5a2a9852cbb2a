package resilience

// The tables hand every change to a persist function that must not block (a write-behind
// queue in production). A table built without one (nil, as in most tests) drops its changes.

// orDrop is persist, or a function that drops what it is given when persist is nil.
func orDrop[T any](persist func(T)) func(T) {
	if persist == nil {
		return func(T) {}
	}
	return persist
}

// orDrop2 is orDrop for the tables whose changes are a key and a value (nil = deleted).
func orDrop2[K, V any](persist func(K, V)) func(K, V) {
	if persist == nil {
		return func(K, V) {}
	}
	return persist
}
