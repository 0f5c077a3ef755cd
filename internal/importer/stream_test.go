package importer

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/iotest"
	"time"
)

// writeDump writes a YOURLS database as mysqldump writes it: the options,
// the URL table (links rows) and the log table (logRows rows, a row per
// click, as a busy install has millions of), in extended INSERTs of about
// 1 MB (mysqldump's net_buffer_length). It returns the bytes written.
func writeDump(w io.Writer, links, logRows int) (int64, error) {
	bw := bufio.NewWriterSize(w, 1<<20)
	var written int64
	put := func(s string) {
		n, _ := bw.WriteString(s)
		written += int64(n)
	}
	put("-- MySQL dump 10.13  Distrib 8.0.36, for Linux (x86_64)\n--\n-- Host: localhost    Database: yourls\n\n" +
		"/*!40101 SET @OLD_CHARACTER_SET_CLIENT=@@CHARACTER_SET_CLIENT */;\n/*!50503 SET NAMES utf8mb4 */;\n\n" +
		"DROP TABLE IF EXISTS `yourls_options`;\nCREATE TABLE `yourls_options` (\n  `option_id` bigint unsigned NOT NULL AUTO_INCREMENT,\n  `option_name` varchar(64) NOT NULL DEFAULT '',\n  `option_value` longtext NOT NULL,\n  PRIMARY KEY (`option_id`,`option_name`)\n) ENGINE=InnoDB;\n" +
		"LOCK TABLES `yourls_options` WRITE;\nINSERT INTO `yourls_options` VALUES (1,'version','1.9.2'),(2,'db_version','505');\nUNLOCK TABLES;\n\n" +
		"DROP TABLE IF EXISTS `yourls_url`;\nCREATE TABLE `yourls_url` (\n  `keyword` varchar(100) NOT NULL,\n  `url` text NOT NULL,\n  `title` text,\n  `timestamp` timestamp NOT NULL DEFAULT CURRENT_TIMESTAMP,\n  `ip` varchar(41) NOT NULL,\n  `clicks` int unsigned NOT NULL,\n  PRIMARY KEY (`keyword`)\n) ENGINE=InnoDB;\n" +
		"LOCK TABLES `yourls_url` WRITE;\n")
	const statement = 1 << 20
	var line strings.Builder
	flush := func(table string, row string, first bool) {
		if first || line.Len()+len(row) > statement {
			if line.Len() > 0 {
				put(line.String() + ";\n")
				line.Reset()
			}
			line.WriteString("INSERT INTO `" + table + "` VALUES ")
		} else {
			line.WriteByte(',')
		}
		line.WriteString(row)
	}
	for i := range links {
		flush("yourls_url", fmt.Sprintf("('k%d','https://example.com/articles/%d?utm_source=newsletter','Article %d \\'quoted\\'','2024-01-01 00:00:00','203.0.113.7',%d)", i, i, i, i%1000), i == 0)
	}
	put(line.String() + ";\nUNLOCK TABLES;\n\n")
	line.Reset()
	put("DROP TABLE IF EXISTS `yourls_log`;\nCREATE TABLE `yourls_log` (\n  `click_id` int NOT NULL AUTO_INCREMENT,\n  `click_time` datetime NOT NULL,\n  `shorturl` varchar(100) NOT NULL,\n  `referrer` varchar(200) NOT NULL,\n  `user_agent` varchar(255) NOT NULL,\n  `ip_address` varchar(41) NOT NULL,\n  `country_code` char(2) NOT NULL,\n  PRIMARY KEY (`click_id`)\n) ENGINE=InnoDB;\n" +
		"LOCK TABLES `yourls_log` WRITE;\n")
	for i := range logRows {
		flush("yourls_log", "("+strconv.Itoa(i+1)+",'2024-03-01 12:34:56','k"+strconv.Itoa(i%max(links, 1))+"','https://t.co/x"+strconv.Itoa(i%997)+"','Mozilla/5.0 (X11; Linux) Chrome/120','198.51.100.23','US')", i == 0)
	}
	put(line.String() + ";\nUNLOCK TABLES;\n")
	return written, bw.Flush()
}

// peakHeap samples the heap in use (runtime.MemStats.HeapInuse) every
// millisecond until the returned function is called, which returns the
// highest sample. The allocations of the code under test are short-lived:
// a peak between two samples would have to be built and freed within a
// millisecond.
func peakHeap() func() uint64 {
	var (
		mu   sync.Mutex
		peak uint64
		done = make(chan struct{})
		wg   sync.WaitGroup
	)
	sample := func() {
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		mu.Lock()
		peak = max(peak, m.HeapInuse)
		mu.Unlock()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		ticker := time.NewTicker(time.Millisecond)
		defer ticker.Stop()
		for {
			select {
			case <-done:
				return
			case <-ticker.C:
				sample()
			}
		}
	}()
	return func() uint64 {
		close(done)
		wg.Wait()
		sample()
		return peak
	}
}

// bigDumpMemoryBound is the promise of docs/import.md: reading a dump takes
// at most this much heap whatever its size, beyond the links it imports
// (20,000 here, a few MiB).
const bigDumpMemoryBound = 64 << 20

// TestReadBigDumpMemory reads a 230 MB YOURLS dump of 2.2 million log rows
// and 20,000 links, written to a temporary file as the test starts, and
// holds the peak heap to bigDumpMemoryBound. Before the reader streamed,
// such a dump took more than 1 GiB (the whole file, and every row of every
// table). With -short the dump is 10 times smaller.
//
// LINKFORGE_BIG_DUMP=FILE writes the dump to FILE and keeps it, for
// measuring the CLI: /usr/bin/time -v bin/linkforge import FILE -o /dev/null.
func TestReadBigDumpMemory(t *testing.T) {
	links, logRows := 20000, 2200000
	if testing.Short() {
		logRows /= 10
	}
	path := os.Getenv("LINKFORGE_BIG_DUMP")
	if path == "" {
		path = filepath.Join(t.TempDir(), "yourls.sql")
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	size, err := writeDump(f, links, logRows)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}

	f, err = os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	start := time.Now()
	stop := peakHeap()
	result, err := Read(f, Options{Now: testNow})
	peak := stop()
	elapsed := time.Since(start)
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d MB dump (%d links, %d log rows) read in %s: peak heap in use %.1f MiB (%.1f MiB before), %.0f MiB allocated in all",
		size>>20, links, logRows, elapsed.Round(time.Millisecond), float64(peak)/(1<<20), float64(before.HeapInuse)/(1<<20), float64(after.TotalAlloc-before.TotalAlloc)/(1<<20))
	if result.Format != FormatYOURLSSQL || len(result.Links) != links || len(result.Skipped) != 0 {
		t.Fatalf("format %s, %d links, skipped %v; want yourls-sql, %d links, none skipped", result.Format, len(result.Links), result.Skipped, links)
	}
	if last := result.Links[links-1]; last.Code != "k19999" || last.Annotations[TitleAnnotation] != "Article 19999 'quoted'" {
		t.Errorf("last link %+v", last)
	}
	if !strings.Contains(strings.Join(result.Notes, "\n"), "read table yourls_url; the rows of 2 other table(s) of the dump were ignored") {
		t.Errorf("notes %q", result.Notes)
	}
	if peak > bigDumpMemoryBound {
		t.Errorf("peak heap in use %.1f MiB reading a %d MB dump, want at most %d MiB", float64(peak)/(1<<20), size>>20, bigDumpMemoryBound>>20)
	}
}

// TestReadStreams: every fixture reads the same a byte at a time, through
// a reader that fails with its last byte, as it does from memory: the
// readers keep no state across the reads of the input but what they mean to.
func TestReadStreams(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "*"))
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range files {
		if strings.HasSuffix(file, ".md") {
			continue
		}
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		want, err := Parse(data, Options{Now: testNow})
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		got, err := Read(iotest.DataErrReader(iotest.OneByteReader(bytes.NewReader(data))), Options{Now: testNow})
		if err != nil {
			t.Fatalf("%s, a byte at a time: %v", file, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: a byte at a time\n%+v\nwant\n%+v", file, got, want)
		}
	}
}

// TestReadBigJSON: a JSON export longer than what detection looks at is
// told by its first link and read to the end; the members after the links
// (Sink's list_complete) still count.
func TestReadBigJSON(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"links":[`)
	n := 0
	for ; b.Len() < 2*detectPeek; n++ {
		if n > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"slug":"s%d","url":"https://example.com/%d","title":"%s"}`, n, n, strings.Repeat("t", 100))
	}
	b.WriteString(`],"cursor":"next","list_complete":false}`)
	result, err := Read(strings.NewReader(b.String()), Options{Now: testNow})
	if err != nil {
		t.Fatal(err)
	}
	if result.Format != FormatSinkJSON || len(result.Links) != n || len(result.Skipped) != 0 {
		t.Fatalf("format %s, %d links, %d skipped; want sink-json, %d, 0", result.Format, len(result.Links), len(result.Skipped), n)
	}
	if notes := strings.Join(result.Notes, "\n"); !strings.Contains(notes, "cursor=next") {
		t.Errorf("notes %q lack the cursor", notes)
	}

	// Broken after the first MiB: an error, not half an import.
	broken := b.String()[:3*detectPeek/2]
	if _, err := Read(strings.NewReader(broken), Options{Now: testNow}); err == nil || !strings.Contains(err.Error(), "not a Sink export: unexpected EOF") {
		t.Errorf("truncated export: error %v", err)
	}
}
