package restore

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// The first line of an upgrade's backup says which cluster (its kube-system namespace's UID),
// server and release it was taken on; restore reads it to refuse putting one cluster's objects
// into another. It is a YAML comment: kubectl reads the file as plain documents.
const backupMagic = "# kubectl crdver upgrade backup: every object at every version that holds its data"

// BackupHeader is the first line of a backup taken on cluster ("" when unknown) at server for
// release (its key), with its newline.
func BackupHeader(cluster, server, release string) string {
	if cluster == "" {
		cluster = "unknown"
	}
	if len(release) > 16 {
		release = release[:16]
	}
	return fmt.Sprintf("%s; cluster %s (kube-system uid), server %s, release %s\n", backupMagic, cluster, server, release)
}

// BackupTrailer is the last line of a backup of n documents (one per object and version), with
// its newline: it says the file is whole, and how many documents a restore of it goes through.
func BackupTrailer(n int64) string { return fmt.Sprintf("%s%d objects\n", backupTrailer, n) }

const backupTrailer = "# end of backup: "

// IsBackupTrailer reports whether line (without its newline) is a backup's last line.
func IsBackupTrailer(line string) bool { return strings.HasPrefix(line, backupTrailer) }

// backupDocuments is the number of documents the closing line of each backup file names (read
// from the end of each file), or -1 when a file has none (not an upgrade's backup, not whole,
// not a regular file).
func backupDocuments(files []string) int64 {
	var total int64
	for _, f := range files {
		n := closingCount(f)
		if n < 0 {
			return -1
		}
		total += n
	}
	return total
}

func closingCount(file string) int64 {
	st, err := os.Stat(file) // before opening it: opening a FIFO waits for its writer
	if err != nil || !st.Mode().IsRegular() {
		return -1
	}
	fh, err := os.Open(file)
	if err != nil {
		return -1
	}
	defer fh.Close()
	const tail = 256
	buf := make([]byte, min(st.Size(), tail))
	if _, err := fh.ReadAt(buf, st.Size()-int64(len(buf))); err != nil {
		return -1
	}
	lines := strings.Split(strings.TrimRight(string(buf), "\n"), "\n")
	var n int64
	if _, err := fmt.Sscanf(lines[len(lines)-1], backupTrailer+"%d objects", &n); err != nil {
		return -1
	}
	return n
}

// BackupCluster is the cluster a backup's first line names ("" when it names none: an older
// backup, or one of unknown cluster).
func BackupCluster(first string) string {
	if !strings.HasPrefix(first, backupMagic) {
		return ""
	}
	_, rest, ok := strings.Cut(first, "; cluster ")
	if !ok {
		return ""
	}
	id, _, _ := strings.Cut(rest, " ")
	if id == "unknown" {
		return ""
	}
	return id
}

// ErrOtherCluster: a backup file was taken on another cluster than the one reached.
var ErrOtherCluster = errors.New("the backup was taken on another cluster")

// OtherClusterError names the file and both clusters.
type OtherClusterError struct {
	File          string
	Backup, Reach string
}

func (e *OtherClusterError) Error() string {
	return fmt.Sprintf("%s was taken on another cluster (kube-system uid %s) than the one reached (%s): nothing was written", e.File, e.Backup, e.Reach)
}

func (e *OtherClusterError) Unwrap() error { return ErrOtherCluster }

// checkClusters refuses a backup file whose first line names another cluster than cluster.
// Run gives it the copies of stdin and pipes ("-" itself is not read here).
func checkClusters(files []string, cluster string) error {
	if cluster == "" {
		return nil
	}
	for _, f := range files {
		if f == "-" {
			continue
		}
		fh, err := os.Open(f)
		if err != nil {
			continue // a folder or a URL: manifest reads and reports it
		}
		first, _ := bufio.NewReader(io.LimitReader(fh, 4096)).ReadString('\n')
		fh.Close()
		if id := BackupCluster(first); id != "" && id != cluster {
			return &OtherClusterError{File: f, Backup: id, Reach: cluster}
		}
	}
	return nil
}
