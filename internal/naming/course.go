package naming

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"github.com/userland-dev/userland/api/v1alpha1"
)

// maxCoursePart is how much of a course's name a course environment's
// readable name carries: the longest readable name (45) and "--" leave 16
// of a Service name's 63.
const maxCoursePart = maxLabel - maxUserPart - 1 - maxTemplatePart - 2

// CourseCandidateNames are the names a course's environment of user from
// ref may take, in order of preference. The controller (listed users) and
// the gateway (sign-in) both create course environments under them.
//
// A course's environment is named for the course: the user's readable
// name, "--" and the course ("alice-jupyterlab--db" for course db), else
// the readable name, "---" and a hash of course, user, kind and template.
// No personal name (ReadableName, HashedName, NameFor) contains "--", and
// in the readable course form it is the only run of '-' longer than one,
// so whatever a course is called, its environments never take a name a
// personal environment has or had. That matters because claims are named
// for their environment and re-mounted by name: a course environment must
// never mount a claim a student's own environment left behind (its staff
// reach course environments). A course environment's host label is the
// hashed form (HostLabel), as for any name with "--".
func CourseCandidateNames(course, user string, ref v1alpha1.TemplateReference) []string {
	readable := ReadableName(user, ref.Name)
	sum := sha256.Sum256([]byte(course + "\x00" + user + "\x00" + string(ref.Kind.OrDefault()) + "/" + ref.Name))
	return []string{
		readable + "--" + strings.TrimPrefix(sanitise(course, maxCoursePart), "u-"),
		readable + "---" + hex.EncodeToString(sum[:])[:hashLen],
	}
}
