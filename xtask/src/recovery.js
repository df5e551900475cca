// handoff's wrapping of the Worker's exported classes, put in place of worker-build's by
// `cargo xtask build` (xtask/src/shim.rs). It keeps worker-build's panic recovery exactly: a
// wasm trap (`WebAssembly.RuntimeError`) marks the module broken, the next call resets it
// (`checkReinitialize`), and an object built on the old module is built again with the same
// arguments before it is used. worker-build does that with a Proxy around every object and a new
// Proxy around every method on each access (`this.env` included), several allocations and traps
// per request; here each class's methods are wrapped once, on its prototype.
// Uses worker-build's own `initState`, `checkReinitialize` and `handleMaybeCritical`, and
// `HandoffDurableObject`, imported by xtask/src/shim.rs.

const handoffBuiltWith = new WeakMap();
const handoffWrapped = new WeakSet();

function handoffWrapMethods(ctor) {
  if (handoffWrapped.has(ctor)) return;
  handoffWrapped.add(ctor);
  const proto = ctor.prototype;
  // The object to call: itself, or its rebuilt twin once the module was reset after a trap.
  const current = (self) => {
    const built = handoffBuiltWith.get(self);
    if (built === undefined) return self;
    if (built.instanceId !== initState.instanceId) {
      built.current = Reflect.construct(ctor, built.args);
      built.instanceId = initState.instanceId;
    }
    return built.current;
  };
  for (const name of Object.getOwnPropertyNames(proto)) {
    const descriptor = Object.getOwnPropertyDescriptor(proto, name);
    const method = descriptor.value;
    if (name === "constructor" || typeof method !== "function") continue;
    const wrapped =
      method.constructor === Function
        ? function (...args) {
            checkReinitialize();
            const target = current(this);
            try {
              return method.apply(target, args);
            } catch (e) {
              handleMaybeCritical(e);
              throw e;
            }
          }
        : async function (...args) {
            checkReinitialize();
            const target = current(this);
            try {
              return await method.apply(target, args);
            } catch (e) {
              handleMaybeCritical(e);
              throw e;
            }
          };
    Object.defineProperty(proto, name, { ...descriptor, value: wrapped });
  }
}

const handoffConstructHook = {
  construct(ctor, args, newTarget) {
    try {
      checkReinitialize();
      const instance = Reflect.construct(ctor, args, newTarget);
      handoffBuiltWith.set(instance, {
        instanceId: initState.instanceId,
        args,
        current: instance,
      });
      return instance;
    } catch (e) {
      initState.criticalError = true;
      throw e;
    }
  },
};

// A class whose objects hold pointers into the module (the Durable Objects): built through one
// construct hook that remembers the arguments to build them again after a reset.
// A class that exports `handoffRpc` (src/rpc.rs) takes its ops over JS RPC, which the runtime
// serves only for classes deriving from `DurableObject`: its prototype chain is pointed there
// (what worker-build itself does for the classes of its other shim).
function handoffObjectClass(ctor) {
  if (typeof ctor.prototype.handoffRpc === "function") {
    Object.setPrototypeOf(ctor.prototype, HandoffDurableObject.prototype);
    Object.setPrototypeOf(ctor, HandoffDurableObject);
  }
  handoffWrapMethods(ctor);
  return new Proxy(ctor, handoffConstructHook);
}

// The entrypoint holds nothing of the module's (workerd builds one per request): exported as it
// is, its methods wrapped.
//
// Its `fetch` hides the request's `cf` first. worker's conversion of the request
// (`worker::Request::from`) reads `cf`, and the runtime builds that object anew for every
// request from its JSON; handoff reads nothing of it, so an own `cf` of `undefined` shadows the
// runtime's getter (`Request::cf()` is `None` in handoff). `bench profile get` put that read at
// 2.6 % of the Worker's CPU per `opencode_get_result`.
function handoffEntrypointClass(ctor) {
  const fetch = ctor.prototype.fetch;
  if (typeof fetch === "function") {
    ctor.prototype.fetch = function (request, ...rest) {
      if (request !== null && typeof request === "object") {
        Object.defineProperty(request, "cf", { value: undefined });
      }
      return fetch.call(this, request, ...rest);
    };
  }
  handoffWrapMethods(ctor);
  return ctor;
}
