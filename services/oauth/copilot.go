package oauth

import (
	"context"
	"errors"
	"time"

	"switchyard/services/catalog"
)

// GitHub Copilot accounts (provider type copilot).

var errCopilotTODO = errors.New("copilot accounts: not built yet")

// refreshGitHub makes one refresh of a GitHub token that expires (one with a refresh token).
func (s *Service) refreshGitHub(ctx context.Context, cred catalog.OAuthCredential, now time.Time) (catalog.OAuthCredential, error) {
	return catalog.OAuthCredential{}, errCopilotTODO
}

// StartCopilotDevice begins a GitHub device sign-in for owner.
func (s *Service) StartCopilotDevice(ctx context.Context, provider, name, owner string) (DeviceFlow, error) {
	return DeviceFlow{}, errCopilotTODO
}

// PollCopilotDevice polls owner's GitHub device sign-in.
func (s *Service) PollCopilotDevice(ctx context.Context, flow, owner string) (DevicePoll, error) {
	return DevicePoll{}, errCopilotTODO
}

// CopilotToken returns the connection's Copilot token (exchanged from its GitHub token, cached)
// and the API base address its token answer named.
func (s *Service) CopilotToken(ctx context.Context, conn *catalog.ConnEntry) (token, apiBase string, err error) {
	return "", "", errCopilotTODO
}

// CopilotRejected is told that Copilot answered 401 to rejected; it exchanges once more (unless
// another request already did) and returns the token to try again with.
func (s *Service) CopilotRejected(ctx context.Context, conn *catalog.ConnEntry, rejected string) (token, apiBase string, err error) {
	return "", "", errCopilotTODO
}
