package oauth

import (
	"context"
	"errors"
	"time"

	"switchyard/services/catalog"
)

// ChatGPT/Codex accounts (provider type codex).

var errCodexTODO = errors.New("codex accounts: not built yet")

// refreshCodex makes one refresh of a ChatGPT account.
func (s *Service) refreshCodex(ctx context.Context, cred catalog.OAuthCredential, now time.Time) (catalog.OAuthCredential, error) {
	return catalog.OAuthCredential{}, errCodexTODO
}

// StartCodex begins a ChatGPT sign-in (authorization code with PKCE, paste-back).
func (s *Service) StartCodex(provider, name string) (SignIn, error) { return SignIn{}, errCodexTODO }

// CompleteCodex finishes a ChatGPT sign-in with the pasted callback address or CODE#STATE.
func (s *Service) CompleteCodex(ctx context.Context, pasted string) (catalog.Connection, bool, error) {
	return catalog.Connection{}, false, errCodexTODO
}

// StartCodexDevice begins a ChatGPT device sign-in for owner.
func (s *Service) StartCodexDevice(ctx context.Context, provider, name, owner string) (DeviceFlow, error) {
	return DeviceFlow{}, errCodexTODO
}

// PollCodexDevice polls owner's ChatGPT device sign-in.
func (s *Service) PollCodexDevice(ctx context.Context, flow, owner string) (DevicePoll, error) {
	return DevicePoll{}, errCodexTODO
}
