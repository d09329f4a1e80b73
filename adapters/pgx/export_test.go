package outboxpgx

// The helpers of the internal tests that the tests of package
// outboxpgx_test use too.
var (
	OpenTestPool = testPool
	NewTestStore = testStore
)
