// Package hpack implements HPACK, the header compression of HTTP/2 (RFC
// 7541), for package h2: a Decoder and an Encoder per connection, each
// holding its dynamic table.
//
// The Decoder implements all of RFC 7541: integers (5.1), plain and
// Huffman-coded string literals (5.2, Appendix B), indexed fields and
// literals with incremental indexing, without indexing and never indexed
// (6.1, 6.2), and dynamic table size updates (6.3) with the eviction rules
// of 4.3 and 4.4. It is strict: an integer above 2^32-1 or with more than
// five continuation bytes, index 0 or an index past the tables, a string
// longer than the rest of the block, a Huffman string containing EOS or
// padded with more than 7 bits or with anything but ones, a size update
// above the maximum or after a field, and a block without the size update
// a lowered maximum requires (4.2) are errors, all of them HTTP/2
// COMPRESSION_ERRORs. A block may start with any number of size updates,
// as the RFC allows: each costs its bytes, as any representation does.
//
// Bounds: a decoder's memory is its dynamic table (at most twice its maximum
// size in bytes, plus about maximum/8 entries of 40 bytes) and scratch
// for one field's Huffman-decoded strings (at most 8/5 of the block) and a
// copied name (at most the table's size). A string's length is checked
// against the block before anything is decoded, and the decoded list is
// checked against the maxList bound given to NewDecoder (counted as RFC 9113
// counts SETTINGS_MAX_HEADER_LIST_SIZE): beyond it no field is emitted but
// the block is decoded to its end, so the table stays in step and HTTP/2 can
// refuse the one request (ErrListTooLarge).
//
// The Encoder uses a dynamic table of at most 4096 bytes (less if the peer
// says so), finds static entries through a map built at init and dynamic ones
// by a scan of hashes, sends never-indexed literals for Field.Sensitive,
// "authorization" and "cookie" values under 20 bytes, does not index the
// fields whose values change per message (":path", "age",
// "content-length", "etag", "if-modified-since", "if-none-match",
// "location", "set-cookie") or that would take more than 3/4 of the table,
// and Huffman-codes a string when that is strictly shorter.
//
// Both keep a dynamic table's entries back to back in one byte slice and
// their offsets in a slice of entries, reclaiming evicted space by moving
// the live bytes to the front; once grown, decoding and encoding into a
// buffer with room allocate nothing.
//
// The package does not check what HTTP/2 requires of the fields themselves
// (lowercase names, pseudo-header order, connection-specific fields): that
// is package h2's. It does not split blocks into frames, and it is not safe
// for concurrent use: a Decoder or Encoder belongs to one connection and is
// used by one goroutine at a time.
package hpack
