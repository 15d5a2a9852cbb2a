package settings

import (
	"context"
	"maps"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"switchyard/services/errs"
)

// OAuthStoreKey is the key_value key holding the operator's saved OAuth client settings.
const OAuthStoreKey = "settings.oauth"

// OAuth is the OAuth client settings document of GET/PATCH /api/settings/oauth: one section
// per provider kind. It is read, layered (default < env < persisted), validated and saved
// exactly like the resilience document; every leaf is described once in oauthRegistry.
type OAuth struct {
	// Claude configures Claude (Anthropic) subscription accounts.
	Claude ClaudeOAuth `json:"claude"`
	// Codex configures ChatGPT/Codex subscription accounts (provider type codex).
	Codex CodexOAuth `json:"codex"`
	// Copilot configures GitHub Copilot accounts (provider type copilot).
	Copilot CopilotOAuth `json:"copilot"`
}

// CodexOAuth are the parameters of ChatGPT sign-in (the public Codex CLI client) and of calls to
// the Codex backend with an account's tokens.
type CodexOAuth struct {
	// AuthorizeURL is where the browser signs in. Default https://auth.openai.com/oauth/authorize.
	AuthorizeURL string `json:"authorize_url"`
	// TokenURL exchanges codes and refreshes tokens (form bodies). Default
	// https://auth.openai.com/oauth/token.
	TokenURL string `json:"token_url"`
	// DeviceUserCodeURL starts a device sign-in. Default
	// https://auth.openai.com/api/accounts/deviceauth/usercode.
	DeviceUserCodeURL string `json:"device_usercode_url"`
	// DeviceTokenURL is polled until the device sign-in is approved. Default
	// https://auth.openai.com/api/accounts/deviceauth/token.
	DeviceTokenURL string `json:"device_token_url"`
	// DeviceVerificationURL is the page the person opens to enter the code. Default
	// https://auth.openai.com/codex/device.
	DeviceVerificationURL string `json:"device_verification_url"`
	// DeviceRedirectURI is the redirect the device sign-in's code is exchanged with. Default
	// https://auth.openai.com/deviceauth/callback.
	DeviceRedirectURI string `json:"device_redirect_uri"`
	// ClientID is the Codex CLI's public OAuth client. Default app_EMoamEEZ73f0CkXaXp7hrann.
	ClientID string `json:"client_id"`
	// Scopes are asked for at sign-in. Default openid profile email offline_access.
	Scopes []string `json:"scopes"`
	// RedirectURI is the loopback redirect the public client is registered with. Default
	// http://localhost:1455/auth/callback.
	RedirectURI string `json:"redirect_uri"`
	// APIBaseURL is the Codex backend; requests go to its /responses. Default
	// https://chatgpt.com/backend-api/codex.
	APIBaseURL string `json:"api_base_url"`
	// RefreshMarginMS refreshes an access token this long before it expires. Default 300,000.
	RefreshMarginMS int64 `json:"refresh_margin_ms"`
	// UsageThreshold is the share (percent) of the 5-hour or weekly window at or above which an
	// account is skipped until the window resets. Default 100; range 1–100.
	UsageThreshold float64 `json:"usage_threshold"`
}

// CopilotOAuth are the parameters of GitHub's device sign-in and of calls to Copilot.
type CopilotOAuth struct {
	// DeviceCodeURL starts a device sign-in. Default https://github.com/login/device/code.
	DeviceCodeURL string `json:"device_code_url"`
	// AccessTokenURL is polled for the GitHub token. Default
	// https://github.com/login/oauth/access_token.
	AccessTokenURL string `json:"access_token_url"`
	// CopilotTokenURL exchanges the GitHub token for a short-lived Copilot token. Default
	// https://api.github.com/copilot_internal/v2/token.
	CopilotTokenURL string `json:"copilot_token_url"`
	// UserURL names the GitHub account a signed-in token belongs to. Default
	// https://api.github.com/user.
	UserURL string `json:"user_url"`
	// ClientID is the Copilot editor plugins' public GitHub client. Default Iv1.b507a08c87ecfe98.
	ClientID string `json:"client_id"`
	// Scopes are asked for at sign-in. Default read:user.
	Scopes []string `json:"scopes"`
	// EditorVersion is sent as Editor-Version. Default vscode/1.104.1.
	EditorVersion string `json:"editor_version"`
	// IntegrationID is sent as Copilot-Integration-Id. Default vscode-chat.
	IntegrationID string `json:"integration_id"`
}

// The rest of the Copilot Chat extension's request fingerprint, sent beside Editor-Version on
// the token exchange and on every call to Copilot. Copilot checks them loosely; they move with
// the extension's releases, far less often than the editor version.
const (
	CopilotPluginVersion = "copilot-chat/0.31.0"
	CopilotUserAgent     = "GitHubCopilotChat/0.31.0"
	GitHubAPIVersion     = "2026-06-01"
)

// ClaudeOAuth are the parameters of Claude sign-in and of calls made with subscription tokens.
// Anthropic moves these endpoints from time to time, so each one is a setting.
type ClaudeOAuth struct {
	// AuthorizeURL is where the browser signs in. Default https://claude.ai/oauth/authorize.
	AuthorizeURL string `json:"authorize_url"`
	// TokenURL exchanges codes and refreshes tokens (JSON bodies). Default
	// https://platform.claude.com/v1/oauth/token.
	TokenURL string `json:"token_url"`
	// UsageURL answers the account's 5-hour and weekly utilisation. Default
	// https://api.anthropic.com/api/oauth/usage.
	UsageURL string `json:"usage_url"`
	// ClientID is Claude Code's public OAuth client. Default 9d1c250a-e61b-44d9-88ed-5944d1962f5e.
	ClientID string `json:"client_id"`
	// Scopes are asked for at sign-in. Default user:profile user:inference
	// user:sessions:claude_code user:mcp_servers user:file_upload.
	Scopes []string `json:"scopes"`
	// RedirectURI is the page that shows CODE#STATE for pasting back. Default
	// https://platform.claude.com/oauth/code/callback.
	RedirectURI string `json:"redirect_uri"`
	// CLIVersion is the Claude Code version the gateway names in its User-Agent; new models are
	// refused to old versions, so keep it current. Default 2.1.291.
	CLIVersion string `json:"cli_version"`
	// Betas are added to anthropic-beta on every call with a subscription token. Default
	// claude-code-20250219, oauth-2025-04-20.
	Betas []string `json:"betas"`
	// RefreshMarginMS refreshes an access token this long before it expires. Default 300,000
	// (5 min); range 0–3,600,000.
	RefreshMarginMS int64 `json:"refresh_margin_ms"`
	// UsagePollIntervalMS is how often each account's usage is asked for. Default 300,000
	// (5 min); range 30,000–86,400,000.
	UsagePollIntervalMS int64 `json:"usage_poll_interval_ms"`
	// UsageThreshold is the utilisation (percent of the 5-hour or weekly window) at or above
	// which an account is skipped until the window resets. Default 100; range 1–100.
	UsageThreshold float64 `json:"usage_threshold"`
}

var (
	cliVersionRE = regexp.MustCompile(`^[0-9]+\.[0-9]+\.[0-9]+$`)
	wordRE       = regexp.MustCompile(`^[A-Za-z0-9:._\-]+$`)
)

// oauthRegistry holds every OAuth client setting, in document order.
var oauthRegistry = []*Setting{
	text("claude.authorize_url", "https://claude.ai/oauth/authorize", checkURL, func(o *OAuth) *string { return &o.Claude.AuthorizeURL }),
	text("claude.token_url", "https://platform.claude.com/v1/oauth/token", checkURL, func(o *OAuth) *string { return &o.Claude.TokenURL }),
	text("claude.usage_url", "https://api.anthropic.com/api/oauth/usage", checkURL, func(o *OAuth) *string { return &o.Claude.UsageURL }),
	text("claude.client_id", "9d1c250a-e61b-44d9-88ed-5944d1962f5e", checkWord, func(o *OAuth) *string { return &o.Claude.ClientID }),
	words("claude.scopes", []string{"user:profile", "user:inference", "user:sessions:claude_code", "user:mcp_servers", "user:file_upload"},
		func(o *OAuth) *[]string { return &o.Claude.Scopes }),
	text("claude.redirect_uri", "https://platform.claude.com/oauth/code/callback", checkURL, func(o *OAuth) *string { return &o.Claude.RedirectURI }),
	text("claude.cli_version", "2.1.291", checkCLIVersion, func(o *OAuth) *string { return &o.Claude.CLIVersion }),
	words("claude.betas", []string{"claude-code-20250219", "oauth-2025-04-20"}, func(o *OAuth) *[]string { return &o.Claude.Betas }),
	ms("claude.refresh_margin_ms", 300_000, 0, 3_600_000, func(o *OAuth) *int64 { return &o.Claude.RefreshMarginMS }),
	ms("claude.usage_poll_interval_ms", 300_000, 30_000, 86_400_000, func(o *OAuth) *int64 { return &o.Claude.UsagePollIntervalMS }),
	num("claude.usage_threshold", 100.0, 1, 100, func(o *OAuth) *float64 { return &o.Claude.UsageThreshold }),

	text("codex.authorize_url", "https://auth.openai.com/oauth/authorize", checkURL, func(o *OAuth) *string { return &o.Codex.AuthorizeURL }),
	text("codex.token_url", "https://auth.openai.com/oauth/token", checkURL, func(o *OAuth) *string { return &o.Codex.TokenURL }),
	text("codex.device_usercode_url", "https://auth.openai.com/api/accounts/deviceauth/usercode", checkURL,
		func(o *OAuth) *string { return &o.Codex.DeviceUserCodeURL }),
	text("codex.device_token_url", "https://auth.openai.com/api/accounts/deviceauth/token", checkURL,
		func(o *OAuth) *string { return &o.Codex.DeviceTokenURL }),
	text("codex.device_verification_url", "https://auth.openai.com/codex/device", checkURL,
		func(o *OAuth) *string { return &o.Codex.DeviceVerificationURL }),
	text("codex.device_redirect_uri", "https://auth.openai.com/deviceauth/callback", checkURL,
		func(o *OAuth) *string { return &o.Codex.DeviceRedirectURI }),
	text("codex.client_id", "app_EMoamEEZ73f0CkXaXp7hrann", checkWord, func(o *OAuth) *string { return &o.Codex.ClientID }),
	words("codex.scopes", []string{"openid", "profile", "email", "offline_access"}, func(o *OAuth) *[]string { return &o.Codex.Scopes }),
	text("codex.redirect_uri", "http://localhost:1455/auth/callback", checkURL, func(o *OAuth) *string { return &o.Codex.RedirectURI }),
	text("codex.api_base_url", "https://chatgpt.com/backend-api/codex", checkURL, func(o *OAuth) *string { return &o.Codex.APIBaseURL }),
	ms("codex.refresh_margin_ms", 300_000, 0, 3_600_000, func(o *OAuth) *int64 { return &o.Codex.RefreshMarginMS }),
	num("codex.usage_threshold", 100.0, 1, 100, func(o *OAuth) *float64 { return &o.Codex.UsageThreshold }),

	text("copilot.device_code_url", "https://github.com/login/device/code", checkURL, func(o *OAuth) *string { return &o.Copilot.DeviceCodeURL }),
	text("copilot.access_token_url", "https://github.com/login/oauth/access_token", checkURL,
		func(o *OAuth) *string { return &o.Copilot.AccessTokenURL }),
	text("copilot.copilot_token_url", "https://api.github.com/copilot_internal/v2/token", checkURL,
		func(o *OAuth) *string { return &o.Copilot.CopilotTokenURL }),
	text("copilot.user_url", "https://api.github.com/user", checkURL, func(o *OAuth) *string { return &o.Copilot.UserURL }),
	text("copilot.client_id", "Iv1.b507a08c87ecfe98", checkWord, func(o *OAuth) *string { return &o.Copilot.ClientID }),
	words("copilot.scopes", []string{"read:user"}, func(o *OAuth) *[]string { return &o.Copilot.Scopes }),
	text("copilot.editor_version", "vscode/1.104.1", checkEditorVersion, func(o *OAuth) *string { return &o.Copilot.EditorVersion }),
	text("copilot.integration_id", "vscode-chat", checkWord, func(o *OAuth) *string { return &o.Copilot.IntegrationID }),
}

var oauthByPath, oauthSections = indexRegistry(oauthRegistry)

// oauthSchema is the OAuth document (GET/PATCH /api/settings/oauth).
var oauthSchema = &schema{key: OAuthStoreKey, list: oauthRegistry, byPath: oauthByPath, sections: oauthSections,
	newDoc: func() any { return new(OAuth) },
	cross:  func(any, fieldErrors) []crossCheck { return nil }}

// OAuthSettings returns every OAuth client setting, in document order.
func OAuthSettings() []*Setting { return slices.Clone(oauthRegistry) }

// text is a one-line string setting with a validator.
func text[D any](path, def string, check func(string) *errs.Msg, field func(*D) *string) *Setting {
	return newSetting(path, KindText, def, field, scalar(check),
		func(t string) (string, *errs.Msg) { return strings.TrimSpace(t), nil },
		func(v string) Input { return Input{Text: v} },
		func(in Input) (string, Input, *errs.Msg) {
			t := strings.TrimSpace(in.Text)
			return t, Input{Text: t}, nil
		})
}

// words is a list of tokens (scopes, beta names), written on a form and in the environment
// separated by spaces or commas.
func words[D any](path string, def []string, field func(*D) *[]string) *Setting {
	split := func(t string) []string {
		out := []string{}
		for _, w := range tokenSepRE.Split(strings.TrimSpace(t), -1) {
			if w != "" && !slices.Contains(out, w) {
				out = append(out, w)
			}
		}
		return out
	}
	return newSetting(path, KindWords, def, field, scalar(checkWords),
		func(t string) ([]string, *errs.Msg) { return split(t), nil },
		func(v []string) Input { return Input{Text: strings.Join(v, " ")} },
		func(in Input) ([]string, Input, *errs.Msg) {
			v := split(in.Text)
			return v, Input{Text: strings.Join(v, " ")}, nil
		})
}

func checkURL(s string) *errs.Msg {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Fragment != "" {
		return msg("err.url")
	}
	return nil
}

// matching is the check that a text matches re; key is the message when it does not.
func matching(re *regexp.Regexp, key string) func(string) *errs.Msg {
	return func(s string) *errs.Msg {
		if !re.MatchString(s) {
			return msg(key)
		}
		return nil
	}
}

// The checks of the settings that are one word, or a version as a header writes it.
var (
	checkWord          = matching(wordRE, "err.word")
	checkEditorVersion = matching(editorVersionRE, "err.editor_version")
	checkCLIVersion    = matching(cliVersionRE, "err.cli_version")
)

func checkWords(list []string) *errs.Msg {
	if len(list) == 0 {
		return msg("err.not_empty")
	}
	for _, w := range list {
		if !wordRE.MatchString(w) {
			return msg("err.word_in_list", w)
		}
	}
	return nil
}

// editorVersionRE is an editor and its version, as Copilot's Editor-Version header names them.
var editorVersionRE = regexp.MustCompile(`^[A-Za-z0-9._\-]+/[A-Za-z0-9._\-]+$`)

// OAuthService owns the OAuth client settings: it validates and saves patches and publishes an
// immutable OAuthSnapshot after each save, like Service does for the resilience document.
type OAuthService struct {
	doc document[OAuthSnapshot]
}

// NewOAuth reads the environment (SWITCHYARD_CLAUDE_TOKEN_URL, …) and the saved document. An
// invalid environment value is an error; saved values that are invalid are skipped and
// reported by Warnings. (No OAuth setting depends on the time; now is taken like New takes it.)
func NewOAuth(ctx context.Context, store Store, lookupEnv func(string) (string, bool), now func() time.Time) (*OAuthService, error) {
	s := &OAuthService{doc: document[OAuthSnapshot]{sc: oauthSchema, store: store, topic: OAuthTopic,
		snapshot: func(doc any, sources map[string]string, rev int64) *OAuthSnapshot {
			return &OAuthSnapshot{values: *doc.(*OAuth), sources: sources, revision: rev}
		}}}
	if err := s.doc.load(ctx, lookupEnv); err != nil {
		return nil, err
	}
	return s, nil
}

// Warnings lists the saved values NewOAuth had to ignore, for the caller to log.
func (s *OAuthService) Warnings() []string { return slices.Clone(s.doc.warnings) }

// OAuthTopic names the OAuth client settings to the replicas that share their store: a
// committed save is announced under it (OnCommitted), and a replica that hears it calls Reload.
const OAuthTopic = "oauth_settings"

// OnCommitted registers fn to run after every save that committed, with OAuthTopic; see
// Service.OnCommitted.
func (s *OAuthService) OnCommitted(fn func(topic string)) { s.doc.onCommitted(fn) }

// Reload re-reads the saved values (another replica saved them) and publishes the snapshot
// they make when they differ from the ones in use; see Service.Reload. The snapshot is read
// at each use, so nothing else runs.
func (s *OAuthService) Reload(ctx context.Context) error { return s.doc.reload(ctx) }

// Snapshot returns the current settings; lock-free.
func (s *OAuthService) Snapshot() *OAuthSnapshot { return s.doc.snap.Load() }

// Patch applies a partial document (PATCH /api/settings/oauth); see Service.Apply.
func (s *OAuthService) Patch(ctx context.Context, raw []byte) (*OAuthSnapshot, error) {
	return s.Apply(ctx, parsePatch(oauthSchema, raw))
}

// Apply validates changes and saves all of them or nothing (see Service.Apply).
func (s *OAuthService) Apply(ctx context.Context, ch *Changes) (*OAuthSnapshot, error) {
	return s.doc.apply(ctx, ch)
}

// OAuthSnapshot is an immutable view of the effective OAuth client settings.
type OAuthSnapshot struct {
	values   OAuth
	sources  map[string]string
	revision int64
}

// Claude returns the effective Claude settings (its slices are shared: do not modify them).
func (s *OAuthSnapshot) Claude() ClaudeOAuth { return s.values.Claude }

// Codex returns the effective ChatGPT/Codex settings (its slices are shared: do not modify them).
func (s *OAuthSnapshot) Codex() CodexOAuth { return s.values.Codex }

// Copilot returns the effective GitHub Copilot settings (its slices are shared: do not modify them).
func (s *OAuthSnapshot) Copilot() CopilotOAuth { return s.values.Copilot }

// Value is the effective value of the setting at path, or nil for an unknown path.
func (s *OAuthSnapshot) Value(path string) any {
	if st, ok := oauthByPath[path]; ok {
		return st.get(&s.values)
	}
	return nil
}

// Source names the layer a setting's value came from, or "" for an unknown path.
func (s *OAuthSnapshot) Source(path string) string { return s.sources[path] }

// OAuthDocument is the JSON view of GET /api/settings/oauth.
type OAuthDocument struct {
	Values   OAuth             `json:"values"`
	Sources  map[string]string `json:"sources"`
	Revision int64             `json:"revision"`
}

// Document returns the snapshot as an OAuthDocument.
func (s *OAuthSnapshot) Document() OAuthDocument {
	return OAuthDocument{Values: s.values, Sources: maps.Clone(s.sources), Revision: s.revision}
}
