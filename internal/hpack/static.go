package hpack

// staticTable is RFC 7541 Appendix A; staticTable[0] is unused (index 0 is
// an error), so staticTable[i] is index i.
var staticTable = [staticLen + 1]struct{ name, value string }{
	{"", ""},
	{":authority", ""},
	{":method", "GET"},
	{":method", "POST"},
	{":path", "/"},
	{":path", "/index.html"},
	{":scheme", "http"},
	{":scheme", "https"},
	{":status", "200"},
	{":status", "204"},
	{":status", "206"},
	{":status", "304"},
	{":status", "400"},
	{":status", "404"},
	{":status", "500"},
	{"accept-charset", ""},
	{"accept-encoding", "gzip, deflate"},
	{"accept-language", ""},
	{"accept-ranges", ""},
	{"accept", ""},
	{"access-control-allow-origin", ""},
	{"age", ""},
	{"allow", ""},
	{"authorization", ""},
	{"cache-control", ""},
	{"content-disposition", ""},
	{"content-encoding", ""},
	{"content-language", ""},
	{"content-length", ""},
	{"content-location", ""},
	{"content-range", ""},
	{"content-type", ""},
	{"cookie", ""},
	{"date", ""},
	{"etag", ""},
	{"expect", ""},
	{"expires", ""},
	{"from", ""},
	{"host", ""},
	{"if-match", ""},
	{"if-modified-since", ""},
	{"if-none-match", ""},
	{"if-range", ""},
	{"if-unmodified-since", ""},
	{"last-modified", ""},
	{"link", ""},
	{"location", ""},
	{"max-forwards", ""},
	{"proxy-authenticate", ""},
	{"proxy-authorization", ""},
	{"range", ""},
	{"referer", ""},
	{"refresh", ""},
	{"retry-after", ""},
	{"server", ""},
	{"set-cookie", ""},
	{"strict-transport-security", ""},
	{"transfer-encoding", ""},
	{"user-agent", ""},
	{"vary", ""},
	{"via", ""},
	{"www-authenticate", ""},
}

const staticLen = 61

// staticByName maps a name to its lowest static index; entries sharing a
// name are adjacent in the table. Built once at init and only read after,
// with string(b) keys, which the compiler looks up without allocating.
var staticByName = func() map[string]uint8 {
	m := make(map[string]uint8, staticLen)
	for i := staticLen; i >= 1; i-- {
		m[staticTable[i].name] = uint8(i)
	}
	return m
}()

// staticSearch returns the static index of name+value (exact) or else of
// name alone (exact false), or 0 when the name is not in the table. match
// false skips the name+value search (never-indexed fields).
func staticSearch(name, value []byte, match bool) (idx int, exact bool) {
	i, ok := staticByName[string(name)]
	if !ok {
		return 0, false
	}
	if match {
		for j := int(i); j <= staticLen && staticTable[j].name == string(name); j++ {
			if staticTable[j].value == string(value) {
				return j, true
			}
		}
	}
	return int(i), false
}
