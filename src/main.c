/*
** main.c
** culua, the stand-alone program: runs Lua scripts with the `cuda` module
** a global from the start (culua_openlibs), or an interactive REPL. Modelled on Lua 5.4's lua.c.
*/

#include "config.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <lua.h>
#include <lauxlib.h>
#include <lualib.h>

#if defined(CULUA_USE_READLINE)
#include <readline/readline.h>
#include <readline/history.h>
#endif

#include "culua.h"


#define LUA_INITVARVERSION  "LUA_INIT" LUA_VERSUFFIX   /* LUA_INIT_5_4 */
#define PROMPT       "> "
#define PROMPT2      ">> "
#define MAXINPUT     512
#define EOFMARK      "<eof>"
#define MARKLEN      (sizeof(EOFMARK) / sizeof(char) - 1)

static lua_State *globalL = NULL;
static const char *progname = "culua";
static int use_readline = 0;   /* stdin is a terminal and readline is built in */


/* {====================================================== interruption */

/* the hook set by the signal handler: raise in the running code */
static void lstop (lua_State *L, lua_Debug *ar) {
  (void)ar;
  lua_sethook(L, NULL, 0, 0);
  luaL_error(L, "interrupted!");
}


/*
** A signal handler may not touch the state; it only sets a hook that
** stops the interpreter at its next instruction (as lua.c does).
*/
static void laction (int i) {
  int flag = LUA_MASKCALL | LUA_MASKRET | LUA_MASKLINE | LUA_MASKCOUNT;
  signal(i, SIG_DFL);  /* a second Ctrl-C kills the process */
  lua_sethook(globalL, lstop, flag, 1);
}

/* }====================================================== */


static void print_usage (const char *badoption) {
  FILE *out = badoption ? stderr : stdout;
  if (badoption) {
    if (badoption[1] == 'e' || badoption[1] == 'l')
      fprintf(out, "%s: '%s' needs argument\n", progname, badoption);
    else
      fprintf(out, "%s: unrecognized option '%s'\n", progname, badoption);
  }
  fprintf(out,
    "usage: %s [options] [script [args]]\n"
    "Lua 5.4 with the `cuda` module: devices, memory, NVRTC, launches, catalog.\n"
    "Available options are:\n"
    "  -e stat   execute string 'stat'\n"
    "  -i        enter interactive mode after executing 'script'\n"
    "  -l mod    require library 'mod' into global 'mod'\n"
    "  -l g=mod  require library 'mod' into global 'g'\n"
    "  -v        show version information\n"
    "  -E        ignore environment variables (LUA_INIT, LUA_PATH, LUA_CPATH)\n"
    "  -W        turn warnings on\n"
    "  --help    show this help\n"
    "  --        stop handling options\n"
    "  -         stop handling options and execute stdin\n"
    "With no script, culua runs an interactive REPL when stdin is a terminal,\n"
    "and executes stdin otherwise. The global `cuda` is the module.\n"
    "Environment (besides Lua's LUA_INIT, LUA_PATH, LUA_CPATH):\n"
    "  CULUA_LIBCUDA         the driver library to open instead of libcuda.so.1\n"
    "  CULUA_LIBNVRTC        the NVRTC library to open instead of libnvrtc.so\n"
    "  CULUA_LIBNCCL         the NCCL library to open instead of libnccl.so.2\n"
    "  CULUA_LIBCUDADEVRT    the device runtime (libcudadevrt.a) cuda.link uses\n"
    "  CULUA_CUDA_INCLUDE    the toolkit include directory handed to NVRTC\n"
    "  CULUA_CACHE           the compile cache directory, or 'off'\n"
    "  CULUA_DEVICE          under MPI, keep the default GPU, not the local rank's\n"
    "  CULUA_MPI_STAGE       under a CUDA-aware MPI, stage through host memory\n"
    "  CULUA_CTX_SET         'always': set the context before every launch\n"
    "  CULUA_TEST_WRAP       culua.tap: a command to run culua under (tests)\n"
    "  CULUA_TEST_SANITIZER  culua.tap: the compute-sanitizer tool running (tests)\n"
    "  CULUA_TEST_SHARE      culua.tap: k/m, run the k-th of every m cases (tests)\n"
    "  CULUA_TEST_SKIP_CC    culua.tap: skip tests that build C with cc (tests)\n"
    "  CULUA_TEST_SKIP_MOCK  culua.tap: skip the files on a mock of cuda (tests)\n"
    "  CULUA_SRCDIR          culua.tap: the source tree, for bench/fakecuda.c (tests)\n",
    progname);
  fflush(out);
}


static void l_message (const char *pname, const char *msg) {
  if (pname) fprintf(stderr, "%s: ", pname);
  fprintf(stderr, "%s\n", msg);
  fflush(stderr);
}


/* print the error at the top of the stack, if any */
/*
** A failed script under mpirun would leave the other ranks waiting in
** their next collective: cuda.mpi leaves a function in the registry
** ("culua.fatal") that names the rank and aborts the job. REPL lines
** (progname == NULL there, as in lua.c) are not fatal.
*/
static void fatal_hook (lua_State *L, const char *msg) {
  int top = lua_gettop(L);
  if (progname != NULL &&
      lua_getfield(L, LUA_REGISTRYINDEX, "culua.fatal") == LUA_TFUNCTION) {
    lua_pushstring(L, msg);
    lua_pcall(L, 1, 0, 0);
  }
  lua_settop(L, top);
}


static int report (lua_State *L, int status) {
  if (status != LUA_OK) {
    const char *msg = lua_tostring(L, -1);
    if (msg == NULL) msg = "(error object is not a string)";
    l_message(progname, msg);
    fatal_hook(L, msg);
    lua_pop(L, 1);
  }
  return status;
}


/* message handler: add a traceback to the error message */
static int msghandler (lua_State *L) {
  const char *msg = lua_tostring(L, 1);
  if (msg == NULL) {
    if (luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING)
      return 1;
    msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
  }
  luaL_traceback(L, L, msg, 1);
  return 1;
}


/* call the function below its narg arguments, with traceback and Ctrl-C */
static int docall (lua_State *L, int narg, int nres) {
  int status;
  int base = lua_gettop(L) - narg;
  lua_pushcfunction(L, msghandler);
  lua_insert(L, base);
  globalL = L;
  signal(SIGINT, laction);
  status = lua_pcall(L, narg, nres, base);
  signal(SIGINT, SIG_DFL);
  lua_remove(L, base);
  return status;
}


static void print_version (void) {
  lua_writestring(LUA_COPYRIGHT, strlen(LUA_COPYRIGHT));
  lua_writeline();
  printf("culua %s, the Lua scripting engine for CUDA\n", CULUA_VERSION);
  fflush(stdout);
}


/* the global `arg`: script name at 0, its arguments from 1, options below 0 */
static void createargtable (lua_State *L, char **argv, int argc, int script) {
  int i, narg;
  if (script == argc) script = 0;  /* no script name */
  narg = argc - (script + 1);
  lua_createtable(L, narg, script + 1);
  for (i = 0; i < argc; i++) {
    lua_pushstring(L, argv[i]);
    lua_rawseti(L, -2, i - script);
  }
  lua_setglobal(L, "arg");
}


static int dochunk (lua_State *L, int status) {
  if (status == LUA_OK) status = docall(L, 0, 0);
  return report(L, status);
}


static int dofile (lua_State *L, const char *name) {
  return dochunk(L, luaL_loadfile(L, name));
}


static int dostring (lua_State *L, const char *s, const char *name) {
  return dochunk(L, luaL_loadbuffer(L, s, strlen(s), name));
}


/* -l: require 'mod' into global 'mod', or 'g=mod' into 'g' */
static int dolibrary (lua_State *L, char *globname) {
  int status;
  char *modname = strchr(globname, '=');
  if (modname == NULL) modname = globname;
  else *modname++ = '\0';
  lua_getglobal(L, "require");
  lua_pushstring(L, modname);
  status = docall(L, 1, 1);
  if (status == LUA_OK) lua_setglobal(L, globname);
  return report(L, status);
}


static int pushargs (lua_State *L) {
  int i, n;
  if (lua_getglobal(L, "arg") != LUA_TTABLE)
    luaL_error(L, "'arg' is not a table");
  n = (int)luaL_len(L, -1);
  luaL_checkstack(L, n + 3, "too many arguments to script");
  for (i = 1; i <= n; i++) lua_rawgeti(L, -i, i);
  lua_remove(L, -i);
  return n;
}


static int handle_script (lua_State *L, char **argv) {
  int status;
  const char *fname = argv[0];
  if (strcmp(fname, "-") == 0 && strcmp(argv[-1], "--") != 0)
    fname = NULL;  /* stdin */
  status = luaL_loadfile(L, fname);
  if (status == LUA_OK) {
    int n = pushargs(L);
    status = docall(L, n, LUA_MULTRET);
  }
  return report(L, status);
}


/* {====================================================== arguments */

#define has_error  1   /* bad option */
#define has_i      2   /* -i */
#define has_v      4   /* -v */
#define has_e      8   /* -e */
#define has_E      16  /* -E */
#define has_help   32  /* --help */


/* scan options; return the flags, and in *first the index of the script */
static int collectargs (char **argv, int *first) {
  int args = 0, i;
  if (argv[0] != NULL) {
    if (argv[0][0]) progname = argv[0];
  }
  else {
    *first = -1;
    return 0;
  }
  for (i = 1; argv[i] != NULL; i++) {
    *first = i;
    if (argv[i][0] != '-') return args;  /* the script */
    switch (argv[i][1]) {
      case '-':
        if (strcmp(argv[i], "--help") == 0) return args | has_help;
        if (argv[i][2] != '\0') return has_error;
        *first = i + 1;
        return args;
      case '\0':
        return args;  /* '-' is the script: stdin */
      case 'E':
        if (argv[i][2] != '\0') return has_error;
        args |= has_E;
        break;
      case 'W':
        if (argv[i][2] != '\0') return has_error;
        break;
      case 'i':
        args |= has_i;  /* -i implies -v */
        /* FALLTHROUGH */
      case 'v':
        if (argv[i][2] != '\0') return has_error;
        args |= has_v;
        break;
      case 'e':
        args |= has_e;
        /* FALLTHROUGH */
      case 'l':
        if (argv[i][2] == '\0') {
          i++;
          if (argv[i] == NULL || argv[i][0] == '-') return has_error;
        }
        break;
      case 'h':
        if (argv[i][2] == '\0') return args | has_help;
        return has_error;
      default:
        return has_error;
    }
  }
  *first = 0;
  return args;
}


/* run -e and -l in order; -W too */
static int runargs (lua_State *L, char **argv, int n) {
  int i;
  for (i = 1; i < n; i++) {
    int option = argv[i][1];
    switch (option) {
      case 'e': case 'l': {
        int status;
        char *extra = argv[i] + 2;
        if (*extra == '\0') extra = argv[++i];
        status = (option == 'e') ? dostring(L, extra, "=(command line)")
                                 : dolibrary(L, extra);
        if (status != LUA_OK) return 0;
        break;
      }
      case 'W':
        lua_warning(L, "@on", 0);
        break;
    }
  }
  return 1;
}


static int handle_luainit (lua_State *L) {
  const char *name = "=" LUA_INITVARVERSION;
  const char *init = getenv(name + 1);
  if (init == NULL) {
    name = "=LUA_INIT";
    init = getenv(name + 1);
  }
  if (init == NULL) return LUA_OK;
  if (init[0] == '@') return dofile(L, init + 1);
  return dostring(L, init, name);
}

/* }====================================================== */


/* {====================================================== the REPL */

static const char *get_prompt (lua_State *L, int firstline) {
  const char *p;
  if (lua_getglobal(L, firstline ? "_PROMPT" : "_PROMPT2") == LUA_TNIL)
    return firstline ? PROMPT : PROMPT2;  /* the nil stays as the slot */
  p = luaL_tolstring(L, -1, NULL);
  lua_remove(L, -2);  /* one value on the stack either way */
  return p;
}


/* 1 when the syntax error status/message means "the chunk is unfinished" */
static int incomplete (lua_State *L, int status) {
  if (status == LUA_ERRSYNTAX) {
    size_t lmsg;
    const char *msg = lua_tolstring(L, -1, &lmsg);
    if (lmsg >= MARKLEN && strcmp(msg + lmsg - MARKLEN, EOFMARK) == 0) {
      lua_pop(L, 1);
      return 1;
    }
  }
  return 0;
}


/* read one line into a new string on the stack; 0 at end of input */
static int pushline (lua_State *L, int firstline) {
  char buffer[MAXINPUT];
  char *b = buffer;
  size_t l;
  const char *prmt = get_prompt(L, firstline);
#if defined(CULUA_USE_READLINE)
  if (use_readline) {
    b = readline(prmt);
    lua_pop(L, 1);  /* the prompt */
    if (b == NULL) return 0;
  }
  else
#endif
  {
    fputs(prmt, stdout);
    fflush(stdout);
    lua_pop(L, 1);
    if (fgets(b, MAXINPUT, stdin) == NULL) return 0;
  }
  l = strlen(b);
  if (l > 0 && b[l - 1] == '\n') b[--l] = '\0';
  if (firstline && b[0] == '=')  /* Lua 5.2 habit: '=expr' prints it */
    lua_pushfstring(L, "return %s", b + 1);
  else
    lua_pushlstring(L, b, l);
#if defined(CULUA_USE_READLINE)
  if (use_readline) free(b);
#endif
  return 1;
}


#if defined(CULUA_USE_READLINE)
static char histfile[4096];   /* ~/.culua_history, or "" */
#define HISTMAX 1000
#endif

/*
** Each line goes to the history file as it is entered, not at the end: a
** REPL left by os.exit(), a signal or a crash keeps what was typed.
*/
static void saveline (const char *line) {
#if defined(CULUA_USE_READLINE)
  if (use_readline && line[0] != '\0') {
    add_history(line);
    if (histfile[0] != '\0' && append_history(1, histfile) == 0)
      history_truncate_file(histfile, HISTMAX);
  }
#else
  (void)line;
#endif
}


/* try the line as `return <line>`, so expressions print their values */
static int addreturn (lua_State *L) {
  const char *line = lua_tostring(L, -1);
  const char *retline = lua_pushfstring(L, "return %s;", line);
  int status = luaL_loadbuffer(L, retline, strlen(retline), "=stdin");
  if (status == LUA_OK) {
    lua_remove(L, -2);  /* the modified line */
    saveline(line);
  }
  else
    lua_pop(L, 2);      /* result and modified line */
  return status;
}


/* keep reading while the statement is incomplete */
static int multiline (lua_State *L) {
  for (;;) {
    size_t len;
    const char *line = lua_tolstring(L, 1, &len);
    int status = luaL_loadbuffer(L, line, len, "=stdin");
    if (!incomplete(L, status) || !pushline(L, 0)) {
      saveline(line);
      return status;
    }
    lua_pushliteral(L, "\n");
    lua_insert(L, -2);
    lua_concat(L, 3);
  }
}


/*
** culua.repl's function `name`, or nil (a stock require that fails, say):
** the workbench commands and completion live in lua/repl.lua.
*/
static int pushrepl (lua_State *L, const char *name) {
  int top = lua_gettop(L);
  lua_getglobal(L, "require");
  lua_pushliteral(L, "culua.repl");
  if (lua_pcall(L, 1, 1, 0) != LUA_OK || !lua_istable(L, -1)) {
    lua_settop(L, top);
    lua_pushnil(L);
    return 0;
  }
  lua_getfield(L, -1, name);
  lua_remove(L, -2);
  return lua_isfunction(L, -1);
}


/* a first line that starts with ':' is a workbench command (:help) */
static int docommand (lua_State *L) {
  const char *line = lua_tostring(L, 1);
  if (line[0] != ':') return 0;
  saveline(line);
  if (pushrepl(L, "command")) {
    lua_pushvalue(L, 1);
    if (docall(L, 1, 0) != LUA_OK) report(L, LUA_ERRRUN);
  }
  else lua_pop(L, 1);
  lua_settop(L, 0);
  luaL_loadstring(L, "");   /* nothing left to run or print */
  return 1;
}


#if defined(CULUA_USE_READLINE)
/* readline's callbacks take no user data: the REPL's one state */
static lua_State *completion_state;
static int completion_next;

static char *completion_generator (const char *text, int state) {
  lua_State *L = completion_state;
  int top = lua_gettop(L);   /* readline runs inside pushline: leave its stack be */
  char *word = NULL;
  (void)text;
  if (state == 0) completion_next = 1;
  if (lua_getfield(L, LUA_REGISTRYINDEX, "culua.completions") == LUA_TTABLE &&
      lua_rawgeti(L, -1, completion_next++) == LUA_TSTRING)
    word = strdup(lua_tostring(L, -1));
  lua_settop(L, top);
  return word;
}


/* Tab: culua.repl.complete(the line up to the cursor) gives whole words */
static char **completion (const char *text, int start, int end) {
  lua_State *L = completion_state;
  int top = lua_gettop(L);
  (void)start;
  rl_attempted_completion_over = 1;     /* never file names */
  rl_completion_append_character = '\0';   /* "x." goes on with a field, not a space */
  if (!pushrepl(L, "complete")) {
    lua_settop(L, top);
    return NULL;
  }
  lua_pushlstring(L, rl_line_buffer, (size_t)end);
  if (lua_pcall(L, 1, 1, 0) == LUA_OK && lua_istable(L, -1))
    lua_setfield(L, LUA_REGISTRYINDEX, "culua.completions");
  lua_settop(L, top);
  return rl_completion_matches(text, completion_generator);
}
#endif


/* read a whole chunk: -1 at end of input, else the load status */
static int loadline (lua_State *L) {
  int status;
  lua_settop(L, 0);
  if (!pushline(L, 1)) return -1;
  if (docommand(L)) return LUA_OK;
  if ((status = addreturn(L)) != LUA_OK)
    status = multiline(L);
  lua_remove(L, 1);  /* the line */
  return status;
}


/* the results, through culua.repl's print (tables readably), else print */
static void l_print (lua_State *L) {
  int n = lua_gettop(L);
  if (n > 0) {
    luaL_checkstack(L, LUA_MINSTACK, "too many results to print");
    if (!pushrepl(L, "print")) {
      lua_pop(L, 1);
      lua_getglobal(L, "print");
    }
    lua_insert(L, 1);
    if (lua_pcall(L, n, 0, 0) != LUA_OK)
      l_message(progname, lua_pushfstring(L, "error calling 'print' (%s)",
                                          lua_tostring(L, -1)));
  }
}


static void doREPL (lua_State *L) {
  int status;
  const char *oldprogname = progname;
  progname = NULL;  /* lua.c prints REPL errors without the program name */
#if defined(CULUA_USE_READLINE)
  completion_state = L;
  rl_attempted_completion_function = completion;
  rl_completer_word_break_characters = (char *)" \t\n\"\\'`@$><=;|&{(+-*/%^#~,[]})";
#endif
  while ((status = loadline(L)) != -1) {
    if (status == LUA_OK) status = docall(L, 0, LUA_MULTRET);
    if (status == LUA_OK) l_print(L);
    else report(L, status);
  }
  lua_settop(L, 0);
  lua_writeline();
  progname = oldprogname;
}

/* }====================================================== */


/* the main body, run protected so that no error escapes as an abort */
static int pmain (lua_State *L) {
  int argc = (int)lua_tointeger(L, 1);
  char **argv = (char **)lua_touserdata(L, 2);
  int script = 0;
  int args = collectargs(argv, &script);
  int optlim = (script > 0) ? script : argc;
  if (args == has_error) {
    print_usage(argv[script]);
    return 0;
  }
  if (args & has_help) {
    print_usage(NULL);
    lua_pushboolean(L, 1);
    return 1;
  }
  if (args & has_v) print_version();
  if (args & has_E) {
    lua_pushboolean(L, 1);
    lua_setfield(L, LUA_REGISTRYINDEX, "LUA_NOENV");
  }
  culua_openlibs(L);
  createargtable(L, argv, argc, script);
  lua_gc(L, LUA_GCRESTART);
  lua_gc(L, LUA_GCGEN, 0, 0);
  if (!(args & has_E)) {
    if (handle_luainit(L) != LUA_OK) return 0;
  }
  if (!runargs(L, argv, optlim)) return 0;
  if (script > 0) {
    if (handle_script(L, argv + script) != LUA_OK) return 0;
  }
  if (args & has_i)
    doREPL(L);
  else if (script < 1 && !(args & (has_e | has_v))) {
    if (isatty(0)) {
      print_version();
      doREPL(L);
    }
    else
      dofile(L, NULL);  /* executes stdin as a file */
  }
  lua_pushboolean(L, 1);
  return 1;
}


int main (int argc, char **argv) {
  int status, result;
  lua_State *L = luaL_newstate();
  if (L == NULL) {
    l_message(argv[0], "cannot create state: not enough memory");
    return EXIT_FAILURE;
  }
#if defined(CULUA_USE_READLINE)
  use_readline = isatty(0);
  rl_readline_name = "culua";
  if (use_readline) {
    const char *home = getenv("HOME");
    if (home) {
      FILE *f;
      snprintf(histfile, sizeof(histfile), "%s/.culua_history", home);
      read_history(histfile);
      if ((f = fopen(histfile, "a")) != NULL) fclose(f);   /* append_history needs the file */
    }
  }
#endif
  lua_gc(L, LUA_GCSTOP);
  lua_pushcfunction(L, &pmain);
  lua_pushinteger(L, argc);
  lua_pushlightuserdata(L, argv);
  status = lua_pcall(L, 2, 1, 0);
  result = lua_toboolean(L, -1);
  report(L, status);   /* the history is written line by line (saveline) */
  lua_close(L);
  return (result && status == LUA_OK) ? EXIT_SUCCESS : EXIT_FAILURE;
}
