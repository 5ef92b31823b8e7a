package store

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
)

// MemberHash is the hash of a sorted member set, the MemberHash of a
// community as clustering computes it. A community whose MemberHash does
// not hash its Members was grown since (provisional membership).
func MemberHash(members []string) string {
	h := sha256.New()
	for _, m := range members {
		h.Write([]byte(m))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// ValidateCommunities checks a ReplaceCommunities call as every adapter
// does: a valid tenant, a run number of at least 1 (LastRun reports 0 for
// "none"), and non-empty, unique community ids with non-negative levels.
// Failures wrap ErrInvalid.
func ValidateCommunities(tenant string, run int64, cs []Community) error {
	if err := ValidateTenant(tenant); err != nil {
		return err
	}
	if run < 1 {
		return fmt.Errorf("%w: run %d must be >= 1", ErrInvalid, run)
	}
	seen := make(map[string]bool, len(cs))
	for i, c := range cs {
		if err := checkID(c.ID, MaxEntityIDLen); err != nil {
			return fmt.Errorf("%w: communities[%d]: id %w", ErrInvalid, i, err)
		}
		if seen[c.ID] {
			return fmt.Errorf("%w: communities[%d]: duplicate id %q", ErrInvalid, i, c.ID)
		}
		seen[c.ID] = true
		if c.Level < 0 {
			return fmt.Errorf("%w: communities[%d] %q: level %d is negative", ErrInvalid, i, c.ID, c.Level)
		}
	}
	return nil
}

// SortCommunities sorts cs by level, then id: the order Communities returns.
func SortCommunities(cs []Community) {
	slices.SortFunc(cs, func(a, b Community) int {
		return cmp.Or(cmp.Compare(a.Level, b.Level), cmp.Compare(a.ID, b.ID))
	})
}

// ValidateReport checks a PutReport call as every adapter does. Failures
// wrap ErrInvalid.
func ValidateReport(tenant string, r Report) error {
	if err := ValidateTenant(tenant); err != nil {
		return err
	}
	if err := checkID(r.ID, MaxEntityIDLen); err != nil {
		return fmt.Errorf("%w: report id %w", ErrInvalid, err)
	}
	return nil
}

// ValidateReports checks a PutReports call as every adapter does: each
// report as ValidateReport does, and no id twice. Failures wrap ErrInvalid.
func ValidateReports(tenant string, rs []Report) error {
	if err := ValidateTenant(tenant); err != nil {
		return err
	}
	seen := make(map[string]bool, len(rs))
	for i, r := range rs {
		if err := ValidateReport(tenant, r); err != nil {
			return fmt.Errorf("reports[%d]: %w", i, err)
		}
		if seen[r.ID] {
			return fmt.Errorf("%w: reports[%d]: duplicate id %q", ErrInvalid, i, r.ID)
		}
		seen[r.ID] = true
	}
	return nil
}
