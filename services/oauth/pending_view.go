package oauth

// PendingOf returns the paste-back sign-in of kind (catalog.TypeAnthropic, TypeCodex) started
// with state while it still waits for its code: a card that asks for the code again shows the
// address to sign in at from here, and never another kind's.
func (s *Service) PendingOf(kind, state string) (SignIn, bool) {
	now := s.opt.Clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.pending[state]
	if !ok || p.kind != kind || !now.Before(p.expires) {
		return SignIn{}, false
	}
	return SignIn{AuthURL: p.authURL, State: state, ExpiresAt: p.expires}, true
}
