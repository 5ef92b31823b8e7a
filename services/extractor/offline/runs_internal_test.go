package offline

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestFindInRunsFindsWhatTheExpressionFinds: searching the identifier runs
// only gives the host-name expression's matches over the whole text.
func TestFindInRunsFindsWhatTheExpressionFinds(t *testing.T) {
	re := newComponentFinder(nil, nil).host
	for _, text := range []string{
		"db1005 and cr2-esams failed; asw2-a-eqiad.mgmt was down (mw1017), see es1001.eqiad.wmnet.",
		"db1005.eqiad-x db1005_x x-db1005 DB1005 ab12 ab123 a1-b2-c3 é-db1005 db1005é ...db2001... -db3001-",
		"no digits here", "12345 2020-01-01 10.64.64.1/24", "", "db1", "kafka-main1001 kafka-jumbo1002-x",
	} {
		require.Equal(t, re.FindAllStringIndex(text, -1), nilIfEmpty(findInRuns(re, text)), text)
	}
}

func nilIfEmpty(l [][]int) [][]int {
	if len(l) == 0 {
		return nil
	}
	return l
}
