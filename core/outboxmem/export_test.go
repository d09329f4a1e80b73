package outboxmem

import "slices"

// IndexesMatch reports whether the claim indexes hold exactly the
// committed pending rows they should: claimed the claimed ones, due the
// unclaimed unordered ones, in claim order.
func (s *Store) IndexesMatch() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	claimed, due := 0, 0
	for id, r := range s.rows {
		switch {
		case !pending(r):
		case r.lockedBy != "":
			if s.claimed[id] != r {
				return false
			}
			claimed++
		case r.key() == "":
			if !slices.Contains(s.due, r) {
				return false
			}
			due++
		}
	}
	return claimed == len(s.claimed) && due == len(s.due) && slices.IsSortedFunc(s.due, dueOrder)
}
