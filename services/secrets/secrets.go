// Package secrets seals credentials at rest (AES-256-GCM), derives the session keys from the
// one instance secret, hashes the admin password and mints random tokens.
package secrets

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/crypto/bcrypt"
)

// KeyFileName is the file in the data directory that holds the generated instance secret.
const KeyFileName = "secret.key"

// LoadOrCreateKey returns the instance secret: fromEnv when set, else the key file in dataDir,
// else a new random key written there with mode 0600. created reports that a new file was made.
func LoadOrCreateKey(dataDir, fromEnv string) (key []byte, created bool, err error) {
	if s := strings.TrimSpace(fromEnv); s != "" {
		if len(s) < 16 {
			return nil, false, errors.New("SWITCHYARD_SECRET_KEY must be at least 16 characters")
		}
		return []byte(s), false, nil
	}
	path := filepath.Join(dataDir, KeyFileName)
	b, err := os.ReadFile(path)
	if err == nil {
		s := strings.TrimSpace(string(b))
		if len(s) < 16 {
			return nil, false, fmt.Errorf("secret key file %s is too short", path)
		}
		return []byte(s), false, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, false, fmt.Errorf("read secret key: %w", err)
	}
	s := RandomToken(32)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, false, fmt.Errorf("create secret key: %w", err)
	}
	if _, err := f.WriteString(s + "\n"); err != nil {
		f.Close()
		return nil, false, fmt.Errorf("write secret key: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return nil, false, fmt.Errorf("sync secret key: %w", err)
	}
	if err := f.Close(); err != nil {
		return nil, false, fmt.Errorf("close secret key: %w", err)
	}
	return []byte(s), true, nil
}

// Derive returns n bytes for one purpose derived from the instance secret (HKDF-SHA256), so
// the encryption key and the session keys are independent.
func Derive(secret []byte, purpose string, n int) []byte {
	k, err := hkdf.Key(sha256.New, secret, []byte("switchyard"), purpose, n)
	if err != nil {
		panic(fmt.Sprintf("hkdf: %v", err)) // only for n beyond 255*32, a programming error
	}
	return k
}

// Box seals and opens small secrets with AES-256-GCM; the nonce is stored with the ciphertext.
type Box struct{ aead cipher.AEAD }

// NewBox builds a Box keyed from the instance secret.
func NewBox(secret []byte) (*Box, error) {
	block, err := aes.NewCipher(Derive(secret, "secrets-at-rest v1", 32))
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &Box{aead: aead}, nil
}

// Seal encrypts plaintext; aad binds the ciphertext to its owner (e.g. "connection").
func (b *Box) Seal(plaintext, aad []byte) []byte {
	nonce := make([]byte, b.aead.NonceSize(), b.aead.NonceSize()+len(plaintext)+b.aead.Overhead())
	_, _ = rand.Read(nonce)
	return b.aead.Seal(nonce, nonce, plaintext, aad)
}

// Open decrypts what Seal produced with the same aad.
func (b *Box) Open(sealed, aad []byte) ([]byte, error) {
	ns := b.aead.NonceSize()
	if len(sealed) < ns+b.aead.Overhead() {
		return nil, errors.New("sealed secret too short")
	}
	out, err := b.aead.Open(nil, sealed[:ns], sealed[ns:], aad)
	if err != nil {
		return nil, errors.New("sealed secret cannot be opened with this secret key")
	}
	return out, nil
}

// RandomToken returns n random bytes as unpadded base64url.
func RandomToken(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// HashPassword returns a bcrypt hash of the password.
func HashPassword(pw string) (string, error) {
	h, err := bcrypt.GenerateFromPassword([]byte(pw), bcrypt.DefaultCost)
	if err != nil {
		return "", fmt.Errorf("hash password: %w", err)
	}
	return string(h), nil
}

// CheckPassword reports whether pw matches the bcrypt hash.
func CheckPassword(hash, pw string) bool {
	return bcrypt.CompareHashAndPassword([]byte(hash), []byte(pw)) == nil
}

// SHA256Hex is the stored form of client keys and similar bearer tokens.
func SHA256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}
