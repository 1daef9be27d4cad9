/* A minimal NVTX tool: records every NVTX range push/pop, start/end and mark to a text file.
 *
 * NVTX (the header-only library compiled into the `nvtx` Python package, and into any program
 * using NVTX3) loads the shared library named by NVTX_INJECTION64_PATH on the first NVTX call and
 * calls its `InitializeInjectionNvtx2`; the tool then fills in the function pointers it wants
 * through the export table. This is how Nsight Systems attaches, so a test that loads this library
 * sees exactly the calls Nsight would.
 *
 * Output (one line per call, tab-separated), to the file named by NVTX_RECORDER_OUTPUT:
 *     push   <thread id> <domain> <message>
 *     pop    <thread id> <domain>
 *     start  <thread id> <domain> <range id> <message>
 *     end    <thread id> <domain> <range id>
 *     mark   <thread id> <domain> <message>
 * <domain> is "-" for NVTX's default domain. Without NVTX_RECORDER_OUTPUT the calls are only
 * counted (a stand-in for an attached profiler when measuring overhead).
 *
 * The types below are the NVTX3 ABI, restated so that building the test needs no CUDA toolkit:
 * nvtxEventAttributes_v2 (nvToolsExt.h), the export table and callback ids (nvtxDetail/nvtxTypes.h).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

typedef struct {
    uint16_t version;
    uint16_t size;
    uint32_t category;
    int32_t colorType;
    uint32_t color;
    int32_t payloadType;
    int32_t reserved0;
    union { uint64_t ullValue; int64_t llValue; double dValue; } payload;
    int32_t messageType;
    union { const char *ascii; const void *unicode; const void *registered; } message;
} EventAttributes;

enum { MESSAGE_ASCII = 1, MESSAGE_UNICODE = 2, MESSAGE_REGISTERED = 3 };

typedef void (*FunctionPointer)(void);
typedef int (*GetModuleFunctionTable_t)(int module, FunctionPointer ***table, unsigned int *size);
typedef struct {
    size_t struct_size;
    GetModuleFunctionTable_t GetModuleFunctionTable;
} ExportTableCallbacks;
typedef const void *(*GetExportTable_t)(uint32_t export_table_id);

enum { EXPORT_TABLE_CALLBACKS = 1 };
enum { MODULE_CORE = 1, MODULE_CORE2 = 5 };
enum {  /* NvtxCallbackIdCore */
    CORE_MarkEx = 1, CORE_MarkA = 2, CORE_RangeStartEx = 4, CORE_RangeStartA = 5, CORE_RangeEnd = 7,
    CORE_RangePushEx = 8, CORE_RangePushA = 9, CORE_RangePop = 11,
};
enum {  /* NvtxCallbackIdCore2 */
    CORE2_DomainMarkEx = 1, CORE2_DomainRangeStartEx = 2, CORE2_DomainRangeEnd = 3,
    CORE2_DomainRangePushEx = 4, CORE2_DomainRangePop = 5, CORE2_DomainRegisterStringA = 10,
    CORE2_DomainCreateA = 12,
};

typedef struct { char *name; } Domain;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static FILE *out;
static int out_opened;
static uint64_t next_range_id = 1;
static uint64_t calls;

static FILE *output(void)
{
    if (!out_opened) {
        const char *path = getenv("NVTX_RECORDER_OUTPUT");
        out = path && *path ? fopen(path, "w") : NULL;
        out_opened = 1;
    }
    return out;
}

static const char *domain_name(const void *domain)
{
    return domain ? ((const Domain *)domain)->name : "-";
}

static const char *message_of(const EventAttributes *attr)
{
    if (!attr) return "";
    switch (attr->messageType) {
    case MESSAGE_ASCII: return attr->message.ascii ? attr->message.ascii : "";
    case MESSAGE_REGISTERED: return attr->message.registered ? (const char *)attr->message.registered : "";
    case MESSAGE_UNICODE: return "<unicode>";
    default: return "";
    }
}

/* Every call is written and flushed at once: the test reads the file after the process exits,
 * and a crash must not lose what came before it. */
static void record(const char *event, const void *domain, const char *range_id, const char *message)
{
    pthread_mutex_lock(&lock);
    calls++;
    FILE *f = output();
    if (f) {
        fprintf(f, "%s\t%ld\t%s", event, (long)syscall(SYS_gettid), domain_name(domain));
        if (range_id) fprintf(f, "\t%s", range_id);
        if (message) fprintf(f, "\t%s", message);
        fputc('\n', f);
        fflush(f);
    }
    pthread_mutex_unlock(&lock);
}

static uint64_t record_start(const void *domain, const char *message)
{
    char id[32];
    pthread_mutex_lock(&lock);
    uint64_t range_id = next_range_id++;
    pthread_mutex_unlock(&lock);
    snprintf(id, sizeof id, "%llu", (unsigned long long)range_id);
    record("start", domain, id, message);
    return range_id;
}

static void record_end(const void *domain, uint64_t range_id)
{
    char id[32];
    snprintf(id, sizeof id, "%llu", (unsigned long long)range_id);
    record("end", domain, id, NULL);
}

/* ---- NVTX's default domain ---- */
static void MarkEx(const EventAttributes *attr) { record("mark", NULL, NULL, message_of(attr)); }
static void MarkA(const char *message) { record("mark", NULL, NULL, message); }
static uint64_t RangeStartEx(const EventAttributes *attr) { return record_start(NULL, message_of(attr)); }
static uint64_t RangeStartA(const char *message) { return record_start(NULL, message); }
static void RangeEnd(uint64_t id) { record_end(NULL, id); }
static int RangePushEx(const EventAttributes *attr) { record("push", NULL, NULL, message_of(attr)); return 0; }
static int RangePushA(const char *message) { record("push", NULL, NULL, message); return 0; }
static int RangePop(void) { record("pop", NULL, NULL, NULL); return 0; }

/* ---- named domains ---- */
static void DomainMarkEx(const void *domain, const EventAttributes *attr)
{
    record("mark", domain, NULL, message_of(attr));
}
static uint64_t DomainRangeStartEx(const void *domain, const EventAttributes *attr)
{
    return record_start(domain, message_of(attr));
}
static void DomainRangeEnd(const void *domain, uint64_t id) { record_end(domain, id); }
static int DomainRangePushEx(const void *domain, const EventAttributes *attr)
{
    record("push", domain, NULL, message_of(attr));
    return 0;
}
static int DomainRangePop(const void *domain) { record("pop", domain, NULL, NULL); return 0; }

/* A registered string's handle is a copy of the string, so a message of type REGISTERED reads
 * back as text. */
static const void *DomainRegisterStringA(const void *domain, const char *string)
{
    (void)domain;
    return strdup(string ? string : "");
}

static const void *DomainCreateA(const char *name)
{
    Domain *domain = malloc(sizeof *domain);
    if (domain) domain->name = strdup(name ? name : "");
    return domain;
}

static int assign(GetModuleFunctionTable_t get_table, int module, int id, FunctionPointer fn)
{
    FunctionPointer **table = NULL;
    unsigned int size = 0;
    if (!get_table(module, &table, &size) || !table || (unsigned int)id >= size || !table[id]) return 0;
    *table[id] = fn;
    return 1;
}

int InitializeInjectionNvtx2(GetExportTable_t get_export_table)
{
    const ExportTableCallbacks *callbacks = get_export_table(EXPORT_TABLE_CALLBACKS);
    if (!callbacks || callbacks->struct_size < sizeof(ExportTableCallbacks)) return 0;
    GetModuleFunctionTable_t get = callbacks->GetModuleFunctionTable;
    int ok = 1;
    ok &= assign(get, MODULE_CORE, CORE_MarkEx, (FunctionPointer)MarkEx);
    ok &= assign(get, MODULE_CORE, CORE_MarkA, (FunctionPointer)MarkA);
    ok &= assign(get, MODULE_CORE, CORE_RangeStartEx, (FunctionPointer)RangeStartEx);
    ok &= assign(get, MODULE_CORE, CORE_RangeStartA, (FunctionPointer)RangeStartA);
    ok &= assign(get, MODULE_CORE, CORE_RangeEnd, (FunctionPointer)RangeEnd);
    ok &= assign(get, MODULE_CORE, CORE_RangePushEx, (FunctionPointer)RangePushEx);
    ok &= assign(get, MODULE_CORE, CORE_RangePushA, (FunctionPointer)RangePushA);
    ok &= assign(get, MODULE_CORE, CORE_RangePop, (FunctionPointer)RangePop);
    ok &= assign(get, MODULE_CORE2, CORE2_DomainMarkEx, (FunctionPointer)DomainMarkEx);
    ok &= assign(get, MODULE_CORE2, CORE2_DomainRangeStartEx, (FunctionPointer)DomainRangeStartEx);
    ok &= assign(get, MODULE_CORE2, CORE2_DomainRangeEnd, (FunctionPointer)DomainRangeEnd);
    ok &= assign(get, MODULE_CORE2, CORE2_DomainRangePushEx, (FunctionPointer)DomainRangePushEx);
    ok &= assign(get, MODULE_CORE2, CORE2_DomainRangePop, (FunctionPointer)DomainRangePop);
    ok &= assign(get, MODULE_CORE2, CORE2_DomainRegisterStringA, (FunctionPointer)DomainRegisterStringA);
    ok &= assign(get, MODULE_CORE2, CORE2_DomainCreateA, (FunctionPointer)DomainCreateA);
    return ok;
}

/* How many NVTX calls reached this tool (for a parent process that loaded it with ctypes). */
uint64_t nvtx_recorder_calls(void)
{
    pthread_mutex_lock(&lock);
    uint64_t n = calls;
    pthread_mutex_unlock(&lock);
    return n;
}
