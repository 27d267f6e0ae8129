/*
 * cluster/node/restore.cpp: a server that starts from a backup, or after archive
 * recovery, or as a standby (which may be promoted), is a new node.
 *
 * Its hilo state (register values, configuration votes, windows, free
 * ranges) may have gone back in time: it may accept a claim below one it
 * accepted before, vote twice in one configuration round, and hand out IDs
 * it handed out after the backup. Fencing by write counts (cluster/agent/agent.cpp) sees
 * that only if some proposer that saw the newer counts is reachable. So the
 * server tells itself: when hilo is loaded by the postmaster (before the
 * startup process runs recovery, which renames backup_label to
 * backup_label.old and removes the signal files), it looks for
 *
 *   backup_label      pg_basebackup, pgBackRest, Barman, pg_rewind, and the
 *                     low-level backup API all leave it for the restored copy
 *   recovery.signal   archive recovery, point-in-time recovery
 *   standby.signal    a standby (promotion also changes the timeline)
 *
 * and if one is there it draws a new random restore id and writes it,
 * durably, to $PGDATA/hilo_restore_id before the startup process starts.
 * Every process reads that file; the restore id is mixed into this node's
 * incarnation (cluster/node/config.cpp), so the configuration no longer lists
 * it: its register acceptor and its configuration votes refuse to answer
 * (hilo_require_listed_member), its agent and allocator claim nothing,
 * until a configuration that lists the new incarnation is installed here
 * (hilo_remove_node, then hilo_add_node). The file is the record of the
 * fence: it survives restarts, and a later restore draws a new id.
 *
 * The allocator of each database retires, once per restore id, every window
 * and free range it restored (hilo_restore_retire_windows): they may have
 * been handed out after the backup. That happens only on a node with a
 * cluster configuration; a single node keeps the rule of docs/guarantees.md
 * (take a margin).
 */
#include "node.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

extern "C" {
#include "access/xlog.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "common/file_perm.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/fd.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/tuplestore.h"
}

#define HILO_RESTORE_FILE "hilo_restore_id"

static uint64 restore_id = 0;
static char restore_reason[32] = "";
static char restore_at[64] = "";

uint64 hilo_restore_id(void)
{
    return restore_id;
}

const char *hilo_restore_reason(void)
{
    return restore_reason;
}

static void write_fully(int fd, const char *path, const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, buf, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            ereport(FATAL, (errcode_for_file_access(),
                            errmsg("hilo: could not write file \"%s\": %m", path)));
        buf += n;
        len -= (size_t)n;
    }
}

/* Writes a new restore id: a temporary file, fsync, rename, fsync of the directory. */
static void write_restore_file(const char *reason)
{
    uint64 id = 0;
    while (id == 0)
        if (!pg_strong_random(&id, sizeof(id)))
            ereport(FATAL, (errmsg("hilo: could not generate a random number")));
    char path[MAXPGPATH], tmp[MAXPGPATH];
    snprintf(path, sizeof(path), "%s/%s", DataDir, HILO_RESTORE_FILE);
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    char when[64] = "?";
    time_t now = time(NULL);
    struct tm tm_buf;
    if (gmtime_r(&now, &tm_buf) != NULL)
        strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm_buf);
    char content[256];
    snprintf(content, sizeof(content), "%016llx %s %s\n", (unsigned long long)id, reason, when);

    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | PG_BINARY, pg_file_create_mode);
    if (fd < 0)
        ereport(FATAL,
                (errcode_for_file_access(), errmsg("hilo: could not create file \"%s\": %m", tmp)));
    write_fully(fd, tmp, content, strlen(content));
    if (pg_fsync(fd) != 0)
        ereport(FATAL,
                (errcode_for_file_access(), errmsg("hilo: could not fsync file \"%s\": %m", tmp)));
    close(fd);
    if (rename(tmp, path) != 0)
        ereport(FATAL, (errcode_for_file_access(),
                        errmsg("hilo: could not rename \"%s\" to \"%s\": %m", tmp, path)));
    int dirfd = open(DataDir, O_RDONLY | PG_BINARY, 0);
    if (dirfd < 0 || pg_fsync(dirfd) != 0)
        ereport(FATAL, (errcode_for_file_access(),
                        errmsg("hilo: could not fsync directory \"%s\": %m", DataDir)));
    close(dirfd);
    ereport(LOG,
            (errmsg("hilo: %s found at start: this server may run from a backup or after a "
                    "recovery, so it is a new hilo node (restore id %016llx)",
                    reason, (unsigned long long)id),
             errdetail("In a hilo cluster it takes part in no quorum and hands out no IDs from "
                       "the windows it restored until it is removed and added again "
                       "(hilo_remove_node, then hilo_add_node, on a member)."),
             errhint("The fence is recorded in \"%s\"; never delete that file.", path)));
}

static void read_restore_file(void)
{
    char path[MAXPGPATH];
    snprintf(path, sizeof(path), "%s/%s", DataDir, HILO_RESTORE_FILE);
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        if (errno != ENOENT)
            ereport(FATAL, (errcode_for_file_access(),
                            errmsg("hilo: could not read file \"%s\": %m", path)));
        return;
    }
    char line[256] = "";
    bool ok = fgets(line, sizeof(line), f) != NULL;
    fclose(f);
    unsigned long long id = 0;
    char reason[32] = "", when[64] = "";
    if (ok)
        ok = sscanf(line, "%16llx %31s %63s", &id, reason, when) >= 2 && id != 0;
    if (!ok)
        ereport(FATAL, (errcode(ERRCODE_DATA_CORRUPTED),
                        errmsg("hilo: file \"%s\" is not a hilo restore id", path),
                        errhint("It records that this server started from a backup. Restore it "
                                "from the backup it came with, or write a new random 16-digit "
                                "hex number followed by \"manual\" into it.")));
    restore_id = (uint64)id;
    strlcpy(restore_reason, reason, sizeof(restore_reason));
    strlcpy(restore_at, when, sizeof(restore_at));
}

void hilo_restore_check_at_start(void)
{
    if (DataDir == NULL)
        return;
    /* Only the process that runs (or starts) recovery looks; the others inherit. */
    if (!IsUnderPostmaster) {
        static const char *const markers[] = {"backup_label", "recovery.signal", "standby.signal"};
        for (const char *marker : markers) {
            char path[MAXPGPATH];
            struct stat st;
            snprintf(path, sizeof(path), "%s/%s", DataDir, marker);
            if (stat(path, &st) == 0) {
                write_restore_file(marker);
                break;
            }
        }
    }
    read_restore_file();
}

const char *hilo_not_member_detail(void)
{
    if (restore_id != 0)
        return psprintf(
            "This server started with %s in its data directory (restore id %016llx, "
            "%s): its hilo state may have gone back in time, so it is a new "
            "incarnation that the configuration does not list. It takes part in no "
            "quorum until it is removed and added again.",
            restore_reason, (unsigned long long)restore_id, restore_at);
    return "It was removed, or it is a restored copy whose incarnation the configuration does "
           "not list.";
}

uint32 hilo_member_self_id(const HiloConfig *cfg)
{
    if (cfg->self < 0)
        ereport(ERROR,
                (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                 errmsg("this node is not a member of hilo configuration epoch " INT64_FORMAT,
                        cfg->epoch),
                 errdetail("%s", hilo_not_member_detail())));
    return (uint32)cfg->nodes[cfg->self].id;
}

/*
 * Once per restore id and database: on a node with a cluster configuration,
 * retires every open window and free range (a gap), and records the restore
 * id. Runs in the allocator's first transaction, before it serves anything.
 */
void hilo_restore_retire_windows(void)
{
    if (restore_id == 0 || RecoveryInProgress() || !hilo_catalog_has_table("cluster") ||
        !hilo_catalog_has_table("local_node"))
        return;
    Oid nsp = get_namespace_oid("hilo", false);
    if (get_attnum(get_relname_relid("local_node", nsp), "restore_id") == InvalidAttrNumber)
        return; /* catalog before 0.5.0: ALTER EXTENSION hilo UPDATE */

    static const char *select_sql = "SELECT restore_id FROM hilo.local_node FOR UPDATE";
    hilo_spi_exec(select_sql, 0, NULL, NULL, NULL, false, 1);
    if (SPI_processed == 0 || hilo_spi_int64(0, 1) == (int64)restore_id)
        return;
    static const char *epoch_sql = "SELECT epoch FROM hilo.cluster";
    hilo_spi_exec(epoch_sql, 0, NULL, NULL, NULL, false, 1);
    bool in_cluster = SPI_processed == 1 && hilo_spi_int64(0, 1) > 0;
    uint64 windows = 0, free_ranges = 0;
    if (in_cluster) {
        static const char *windows_sql =
            "UPDATE hilo.windows SET next_hi_value = window_end_value"
            " WHERE next_hi_value < window_end_value";
        static const char *free_sql = "DELETE FROM hilo.free_ranges";
        hilo_spi_exec(windows_sql, 0, NULL, NULL, NULL, false, 0);
        windows = SPI_processed;
        hilo_spi_exec(free_sql, 0, NULL, NULL, NULL, false, 0);
        free_ranges = SPI_processed;
    }
    static const char *update_sql =
        "UPDATE hilo.local_node SET restore_id = $1, restored_at = now()";
    hilo_spi_exec1(update_sql, INT8OID, Int64GetDatum((int64)restore_id), false, 0);
    if (in_cluster)
        ereport(LOG, (errmsg("hilo: this node started with %s: retired " UINT64_FORMAT
                             " open windows and " UINT64_FORMAT
                             " free ranges of database %u (a gap): their IDs may have been "
                             "handed out after the backup",
                             restore_reason, windows, free_ranges, MyDatabaseId)));
}

/* ---- hilo._register_dump(): register values for a membership change's pre-sync ---- */
