// Package identity is who a person is to Userland once signed in: the one
// identity type that the gateway's sessions carry and the course rules
// match against a roster. It is a leaf, so that the course rules, which
// the controller also uses, need not import the gateway to accept it.
package identity

// Identity is a signed-in person. The JSON names are short because the
// identity travels in the session cookie.
type Identity struct {
	// User is the identity Userlands are matched against (spec.user).
	User string `json:"u"`
	// Name is how the user is shown when User is not a name people know
	// (GitHub's login beside its numeric ID); empty: User.
	Name string `json:"n,omitempty"`
	// Email is the verified e-mail address, when known.
	Email string `json:"e,omitempty"`
	// Groups are the identity provider's groups.
	Groups []string `json:"g,omitempty"`
}

// Display is the name pages show for the user.
func (id Identity) Display() string {
	if id.Name != "" {
		return id.Name
	}
	return id.User
}
